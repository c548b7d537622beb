package fs

import (
	"context"
	"maps"
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

// Setattr implements gofs.NodeSetattrer: owner and time changes are kept
// in the link's metadata, through the cache (in order with the link's
// other changes).
func (s *symlinkNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	ctx = uninterrupted(ctx)
	f := s.fsys
	md := setattrMeta(in)
	delete(md, modeKey)
	if len(md) > 0 {
		if f.opts.ReadOnly {
			return syscall.EROFS
		}
		// The link's name now: go-fuse's tree follows renames, the
		// node's name does not.
		name := s.Path(nil)
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
		a.Metadata = maps.Clone(a.Metadata)
		if a.Metadata == nil {
			a.Metadata = map[string]string{}
		}
		maps.Copy(a.Metadata, md)
		s.mu.Lock()
		s.a = a
		s.mu.Unlock()
	}
	return s.Getattr(ctx, fh, out)
}
