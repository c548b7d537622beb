package fs

import (
	"context"
	"slices"
	"strings"
	"syscall"

	"github.com/bucketfs/bucketfs/fs/names"
	"github.com/bucketfs/bucketfs/transfer"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// A symbolic link's owner and time are kept like a file's, in its
// object's metadata: lchown and lutimes (utimensat with
// AT_SYMLINK_NOFOLLOW) change them, as on a local disk. Its mode is
// always 0777 (Linux has no lchmod: the kernel follows the link, or
// refuses fchmodat's AT_SYMLINK_NOFOLLOW itself).

var _ gofs.NodeSetattrer = (*symlinkNode)(nil)

// attrs is the link's object version as the node knows it.
func (s *symlinkNode) attrs() transfer.ObjectAttrs {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.a
}

// symlinkChild answers a lookup of name, a symbolic link of version a.
// The link the kernel holds under that name already, if any, is the same
// link when it is this version or was made here and not yet uploaded
// (its generation 0, now a's): the same inode, so that the kernel's
// revalidation of its entry (a rename's lookups) keeps it, and go-fuse's
// tree keeps one node for the name. Anything else is a new link.
func (d *dirNode) symlinkChild(ctx context.Context, name string, a transfer.ObjectAttrs, out *fuse.EntryOut) *gofs.Inode {
	f := d.fsys
	if in := d.GetChild(name); in != nil {
		if s, ok := in.Operations().(*symlinkNode); ok && s.sameLink(a) {
			s.mu.Lock()
			s.a = a
			s.mu.Unlock()
			f.fillFile(&out.Attr, a, s.ino)
			return in
		}
	}
	ino := f.fileIno(a)
	f.fillFile(&out.Attr, a, ino)
	s := &symlinkNode{fsys: f, ino: ino, a: a}
	in := d.NewInode(ctx, s, gofs.StableAttr{Mode: syscall.S_IFLNK, Ino: ino})
	f.clock.add(s, &s.clockLink)
	return in
}

// sameLink reports whether version a of the name the node has is the
// node's link: the same generation, or the upload of the node's link.
func (s *symlinkNode) sameLink(a transfer.ObjectAttrs) bool {
	cur := s.attrs()
	if cur.Generation != 0 {
		return cur.Generation == a.Generation
	}
	return cur.Metadata[symlinkKey] == a.Metadata[symlinkKey]
}

// Setattr implements gofs.NodeSetattrer: owner and time changes are kept
// in the link's metadata, through the cache (in order with the link's
// other changes).
func (s *symlinkNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	ctx = uninterrupted(ctx)
	f := s.fsys
	if md := setattrMeta(in, false); md != nil {
		if f.opts.ReadOnly {
			return syscall.EROFS
		}
		// The link's name now: go-fuse's tree follows renames, the
		// node's name does not.
		name, ok := treePath(&s.Inode)
		if !ok {
			// Deleted while the kernel held it (a lutimes racing an
			// unlink): as on a local disk, the change is made, to a
			// link nobody can reach any more; nothing is kept.
			s.mu.Lock()
			s.a.Metadata = withMeta(s.a.Metadata, md)
			s.mu.Unlock()
			return s.Getattr(ctx, fh, out)
		}
		c, err := f.names.Resolve(ctx, name, f.warnOnce)
		if err != nil {
			return f.errno(ctx, "setattr", name, err)
		}
		if c.Kind != names.File || !isSymlink(c.Attrs) {
			return syscall.ENOENT
		}
		if err := f.cache.SetMeta(ctx, c.Attrs, md); err != nil {
			return f.errno(ctx, "setattr", name, err)
		}
		a := c.Attrs
		a.Metadata = withMeta(a.Metadata, md)
		s.mu.Lock()
		s.a = a
		s.mu.Unlock()
	}
	return s.Getattr(ctx, fh, out)
}

// treePath is in's path in go-fuse's tree from the root; false if in, or
// a directory above it, is no longer in the tree (deleted while the
// kernel held it). Inode.Path would then give a path from the highest
// node still attached, which names another object.
func treePath(in *gofs.Inode) (string, bool) {
	var segs []string
	for p := in; !p.IsRoot(); {
		name, parent := p.Parent()
		if parent == nil {
			return "", false
		}
		segs = append(segs, name)
		p = parent
	}
	slices.Reverse(segs)
	return strings.Join(segs, "/"), true
}
