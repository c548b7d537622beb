package fs

import (
	"context"
	"maps"
	"strconv"
	"syscall"
	"time"

	"github.com/bucketfs/bucketfs/fs/names"
	"github.com/bucketfs/bucketfs/transfer"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Special files (FIFOs, character and block devices, sockets) are kept as
// symbolic links are: an empty object whose custom metadata says what it
// is, beside the mode and owner every file has:
//
//	bucketfs-type  "fifo", "char", "block" or "socket"
//	bucketfs-rdev  a device's number, decimal (the kernel's encoding of major and minor)
//
// The kernel gives them their behaviour: it never sends OPEN, READ or
// WRITE for an inode of such a type (a FIFO opened in the mount is a pipe
// of the kernel, a device node opens the device), so a special file is a
// fileNode like any other, whose inode has the type in its StableAttr.
// Rename, chmod, chown, utimes and unlink work on it as on a file. Other
// clients of the bucket see an empty object with that metadata.
const (
	typeKey = "bucketfs-type"
	rdevKey = "bucketfs-rdev"
)

// specialTypes are the values of typeKey and the file types they stand
// for.
var specialTypes = map[string]uint32{
	"fifo":   syscall.S_IFIFO,
	"char":   syscall.S_IFCHR,
	"block":  syscall.S_IFBLK,
	"socket": syscall.S_IFSOCK,
}

// fileType is the type (S_IFMT bits) of file object version a: a symbolic
// link, a special file, or (without either key, or with a type this
// version does not know) a regular file.
func fileType(a transfer.ObjectAttrs) uint32 {
	if isSymlink(a) {
		return syscall.S_IFLNK
	}
	if t, ok := specialTypes[a.Metadata[typeKey]]; ok {
		return t
	}
	return syscall.S_IFREG
}

// fillSpecial sets the type and device number of out for a special file;
// it leaves other files alone.
func fillSpecial(out *fuse.Attr, a transfer.ObjectAttrs) {
	t := fileType(a)
	if t == syscall.S_IFREG || t == syscall.S_IFLNK {
		return
	}
	out.Mode = t | out.Mode&0o7777
	out.Size, out.Blocks = 0, 0
	if t == syscall.S_IFCHR || t == syscall.S_IFBLK {
		out.Rdev = metaUint(a.Metadata, rdevKey, 10, 0)
	}
}

// specialMeta is the metadata of a new special file or empty regular
// file made in d by mknod with mode and rdev, by the caller of ctx;
// EINVAL for a type mknod(2) cannot make.
func (d *dirNode) specialMeta(ctx context.Context, mode, rdev uint32) (map[string]string, syscall.Errno) {
	md := map[string]string{modeKey: strconv.FormatUint(uint64(mode&0o7777), 8)}
	switch t := mode & syscall.S_IFMT; t {
	case 0, syscall.S_IFREG:
		// An empty regular file, as mknod(2) makes for type 0 or S_IFREG.
	case syscall.S_IFCHR, syscall.S_IFBLK:
		md[rdevKey] = strconv.FormatUint(uint64(rdev), 10)
		fallthrough
	case syscall.S_IFIFO, syscall.S_IFSOCK:
		for name, st := range specialTypes {
			if st == t {
				md[typeKey] = name
			}
		}
	default:
		return nil, syscall.EINVAL
	}
	// The caller owns what it makes, as on a local disk (owner.go).
	owner, _, errno := d.newOwner(ctx)
	if errno != 0 {
		return nil, errno
	}
	maps.Copy(md, owner)
	return md, 0
}

var _ gofs.NodeMknoder = (*dirNode)(nil)

// Mknod implements gofs.NodeMknoder (mknod, mkfifo, and bind of a unix
// socket to a path): an empty object with the file's type, mode, owner
// and device number in its metadata, written back like a file. The kernel
// checks CAP_MKNOD for devices before it asks.
func (d *dirNode) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	f := d.fsys
	if f.opts.ReadOnly {
		return nil, syscall.EROFS
	}
	md, errno := d.specialMeta(ctx, mode, rdev)
	if errno != 0 {
		return nil, errno
	}
	if errno := d.checkNew(ctx, name); errno != 0 {
		return nil, errno
	}
	full := d.prefix() + name
	a := transfer.ObjectAttrs{Name: full, Updated: time.Now()}
	if err := f.makeEmpty(ctx, a, md); err != nil {
		return nil, f.errno(ctx, "mknod", full, err)
	}
	f.names.Forget(full)
	a.Metadata = md
	f.dirTimes.changed(d.prefix())
	return d.child(ctx, name, names.Entry{Kind: names.File, Attrs: a}, out)
}
