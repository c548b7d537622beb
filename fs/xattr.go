package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// noXattrs answers every extended-attribute call with ENOSYS. The kernel
// then marks the mount as having no xattrs and stops asking: applications
// get EOPNOTSUPP, and a write no longer costs a round trip to look up
// security.capability (which the kernel does before the first write to a
// file). Extended attributes are not stored yet (docs/design.md, limits).
type noXattrs struct{}

var (
	_ gofs.NodeGetxattrer    = noXattrs{}
	_ gofs.NodeSetxattrer    = noXattrs{}
	_ gofs.NodeListxattrer   = noXattrs{}
	_ gofs.NodeRemovexattrer = noXattrs{}
)

func (noXattrs) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

func (noXattrs) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return syscall.ENOSYS
}

func (noXattrs) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

func (noXattrs) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return syscall.ENOSYS
}
