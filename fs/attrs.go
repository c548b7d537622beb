package fs

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/bucketfs/bucketfs/cache"
	"github.com/bucketfs/bucketfs/fs/names"
	"github.com/bucketfs/bucketfs/transfer"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// POSIX attributes live in the object's custom metadata (x-goog-meta-*):
//
//	bucketfs-mode           permission bits, octal ("640")
//	bucketfs-uid            owner, decimal
//	bucketfs-gid            group, decimal
//	gcsfuse_mtime           modification time, RFC 3339 (cache.MtimeKey; gcsfuse reads it)
//	bucketfs-atime, -ctime  access and change times, as gcsfuse_mtime (times.go)
//	gcsfuse_symlink_target  a symbolic link's target (an empty object; gcsfuse's convention)
//
// special.go and xattr.go add the keys of special files (type, device
// number) and of user.* extended attributes.
//
// An object without them shows --file-mode, --uid, --gid and its update
// time. A directory keeps the first three and gcsfuse_mtime in its
// placeholder object ("dir/"); without one, or without a key, it shows
// --dir-mode, --uid, --gid and the mount's start time.
const (
	modeKey    = "bucketfs-mode"
	uidKey     = "bucketfs-uid"
	gidKey     = "bucketfs-gid"
	symlinkKey = "gcsfuse_symlink_target"
)

// isSymlink reports whether object version a is a symbolic link.
func isSymlink(a transfer.ObjectAttrs) bool { return a.Metadata[symlinkKey] != "" }

// metaUint reads a numeric metadata value of base, or def.
func metaUint(md map[string]string, key string, base int, def uint32) uint32 {
	s, ok := md[key]
	if !ok {
		return def // most objects: no error made (and dropped) per getattr
	}
	if v, err := strconv.ParseUint(s, base, 32); err == nil {
		return uint32(v)
	}
	return def
}

// setattrMeta turns the mode (unless withMode is false: a symbolic
// link's is always 0777), owner, access and modification time changes of a setattr into
// metadata changes, with the time of the change (none: nil).
func setattrMeta(in *fuse.SetAttrIn, withMode bool) map[string]string {
	md := map[string]string{}
	if m, ok := in.GetMode(); ok && withMode {
		md[modeKey] = strconv.FormatUint(uint64(m&0o7777), 8)
	}
	if u, ok := in.GetUID(); ok {
		md[uidKey] = strconv.FormatUint(uint64(u), 10)
	}
	if g, ok := in.GetGID(); ok {
		md[gidKey] = strconv.FormatUint(uint64(g), 10)
	}
	if t, ok := in.GetATime(); ok {
		md[atimeKey] = cache.FormatMtime(t)
	}
	if t, ok := in.GetMTime(); ok {
		md[cache.MtimeKey] = cache.FormatMtime(t)
	}
	if len(md) == 0 {
		return nil
	}
	return withCtime(md)
}

// withMeta returns metadata md with changes applied, leaving md as it was.
func withMeta(md, changes map[string]string) map[string]string {
	out := maps.Clone(md)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, changes)
	return out
}

// symlinkNode is a symbolic link: an empty object whose metadata holds
// the target.
type symlinkNode struct {
	gofs.Inode
	clockLink // the bound on the kernel's nodes (reclaim.go)
	fsys      *FS
	ino       uint64 // its name is its place in go-fuse's tree (Path)

	mu sync.Mutex
	a  transfer.ObjectAttrs // guarded by mu: lchown and lutimes change it (symlinkattr.go)
}

var (
	_ gofs.NodeReadlinker = (*symlinkNode)(nil)
	_ gofs.NodeGetattrer  = (*symlinkNode)(nil)
)

// Readlink implements gofs.NodeReadlinker.
func (s *symlinkNode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	return []byte(s.attrs().Metadata[symlinkKey]), 0
}

// Getattr implements gofs.NodeGetattrer.
func (s *symlinkNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	s.fsys.fillFile(&out.Attr, s.attrs(), s.ino)
	out.SetTimeout(s.fsys.opts.MetadataTTL)
	return 0
}

// Symlink implements gofs.NodeSymlinker: an empty object with the target
// in its metadata, written back like a file.
func (d *dirNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	f := d.fsys
	if f.opts.ReadOnly {
		return nil, syscall.EROFS
	}
	if !utf8.ValidString(target) {
		// The target is kept as a metadata value, a JSON string: invalid
		// UTF-8 in it would silently become U+FFFD on the way up.
		return nil, syscall.EINVAL
	}
	if errno := d.checkNew(ctx, name); errno != 0 {
		return nil, errno
	}
	md, _, errno := d.newOwner(ctx)
	if errno != 0 {
		return nil, errno
	}
	md[symlinkKey] = target
	full := d.prefix() + name
	a := transfer.ObjectAttrs{Name: full, Updated: time.Now()}
	if err := f.makeEmpty(ctx, a, md); err != nil {
		return nil, f.errno(ctx, "symlink", full, err)
	}
	f.names.Forget(full)
	a.Metadata = md
	f.dirTimes.changed(d.prefix())
	return d.child(ctx, name, names.Entry{Kind: names.File, Attrs: a}, out)
}

// makeEmpty makes a (a new name) an empty object in the cache, written
// back like a file, with custom metadata md (none if nil): a symbolic
// link, or a directory's placeholder.
func (f *FS) makeEmpty(ctx context.Context, a transfer.ObjectAttrs, md map[string]string) error {
	wh, err := f.cache.OpenWrite(ctx, a, true, false)
	if err != nil {
		return err
	}
	if len(md) > 0 {
		err = f.cache.SetMeta(ctx, a, md)
	}
	if cerr := wh.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkNew checks that name can be made in d: valid, not reserved, not
// taken.
func (d *dirNode) checkNew(ctx context.Context, name string) syscall.Errno {
	if errno := d.newNameErrno(name); errno != 0 {
		return errno
	}
	c, err := d.fsys.names.Resolve(ctx, d.prefix()+name, d.fsys.warnOnce)
	if err != nil {
		return d.fsys.errno(ctx, "create", d.prefix()+name, err)
	}
	if c.Kind != names.None {
		return syscall.EEXIST
	}
	return 0
}

// setMeta applies a setattr's metadata changes to the file of node n:
// through the cache, which sends them in order with the file's other
// changes; a file too big for the cache (so with no local changes) is
// patched in the bucket at once (cache.PatchMeta).
func (n *fileNode) setMeta(ctx context.Context, md map[string]string) error {
	a := n.currentAttrs()
	err := n.fsys.cache.SetMeta(ctx, a, md)
	if !errors.Is(err, cache.ErrNoSpace) || a.Generation <= 0 {
		return err
	}
	na, err := n.fsys.cache.PatchMeta(ctx, a, md)
	if err != nil {
		return err
	}
	n.setAttrs(na)
	n.fsys.names.Forget(a.Name)
	return nil
}
