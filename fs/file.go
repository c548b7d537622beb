package fs

import (
	"context"
	"sync"
	"syscall"

	"github.com/bucketfs/bucketfs/cache"
	"github.com/bucketfs/bucketfs/transfer"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// fileNode is one version (generation) of an object, shown as a regular
// file. A new generation of the same name is a new inode, the way a file
// replaced by rename is on a local disk: handles open on the old version
// keep reading it, and the kernel never mixes two versions in one inode's
// page cache or passthrough backing file.
type fileNode struct {
	gofs.Inode
	fsys *FS
	name string // object name

	mu        sync.Mutex
	attrs     transfer.ObjectAttrs // guarded by mu; Generation never changes
	ptOpen    int                  // guarded by mu: passthrough handles open
	cacheOpen int                  // guarded by mu: handles open in the kernel's caching io mode
}

var (
	_ gofs.NodeGetattrer = (*fileNode)(nil)
	_ gofs.NodeOpener    = (*fileNode)(nil)
	_ gofs.NodeStatfser  = (*fileNode)(nil)
)

// setAttrs records the latest attributes of the node's generation.
func (n *fileNode) setAttrs(a transfer.ObjectAttrs) {
	n.mu.Lock()
	if n.attrs.Generation == 0 || n.attrs.Generation == a.Generation {
		n.attrs = a
	}
	n.mu.Unlock()
}

func (n *fileNode) getAttrs() transfer.ObjectAttrs {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.attrs
}

// Getattr implements gofs.NodeGetattrer. The node is one version, so its
// attributes need no refresh here: a newer version is found by the
// kernel's next lookup of the name, once the entry timeout (the metadata
// TTL) has passed.
func (n *fileNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fsys.fillFile(&out.Attr, n.getAttrs())
	out.SetTimeout(n.fsys.opts.MetadataTTL)
	return 0
}

// Open implements gofs.NodeOpener.
func (n *fileNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		// Writing needs the write-back path, which this build does not have.
		return nil, 0, syscall.EROFS
	}
	a := n.getAttrs()
	ch, err := n.fsys.cache.Open(ctx, a)
	if err != nil {
		return nil, 0, n.fsys.errno(ctx, "open", n.name, err)
	}
	h := &readHandle{node: n, h: ch}

	n.mu.Lock()
	defer n.mu.Unlock()
	// The kernel keeps an inode in one io mode at a time: once a handle is
	// open with passthrough, every other open must be passthrough too, and
	// while a handle is open in caching mode, a passthrough open fails
	// (both with EIO). So passthrough is used for a complete copy while no
	// caching handle is open, and always while a passthrough one is.
	_, complete := ch.PassthroughFd()
	if n.ptOpen > 0 || (complete && n.fsys.opts.Passthrough && n.cacheOpen == 0) {
		n.ptOpen++
		return &passthroughHandle{readHandle: h}, 0, 0
	}
	n.cacheOpen++
	// The inode only ever holds this version, so its page cache stays valid.
	return &cachingHandle{readHandle: h}, fuse.FOPEN_KEEP_CACHE, 0
}

// Statfs implements gofs.NodeStatfser.
func (n *fileNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	statfs(out)
	return 0
}

// readHandle reads one object version through the cache.
type readHandle struct {
	node *fileNode
	h    *cache.Handle
}

var (
	_ gofs.FileReader   = (*readHandle)(nil)
	_ gofs.FileReleaser = (*readHandle)(nil)
	_ gofs.FileFlusher  = (*readHandle)(nil)
)

// Read implements gofs.FileReader.
func (h *readHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, err := h.h.ReadAt(ctx, dest, off)
	if err != nil && n == 0 && off < h.h.Size() {
		return nil, h.node.fsys.errno(ctx, "read", h.node.name, err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// Flush implements gofs.FileFlusher; a read-only handle has nothing to flush.
func (h *readHandle) Flush(ctx context.Context) syscall.Errno { return 0 }

// Release implements gofs.FileReleaser.
func (h *readHandle) Release(ctx context.Context) syscall.Errno {
	h.h.Close()
	return 0
}

// cachingHandle is read through the kernel's page cache.
type cachingHandle struct {
	*readHandle
}

// Release implements gofs.FileReleaser.
func (h *cachingHandle) Release(ctx context.Context) syscall.Errno {
	n := h.node
	n.mu.Lock()
	n.cacheOpen--
	n.mu.Unlock()
	return h.readHandle.Release(ctx)
}

// passthroughHandle lets the kernel read a fully cached file itself.
type passthroughHandle struct {
	*readHandle
}

var _ gofs.FilePassthroughFder = (*passthroughHandle)(nil)

// PassthroughFd implements gofs.FilePassthroughFder.
func (h *passthroughHandle) PassthroughFd() (int, bool) { return h.h.PassthroughFd() }

// Release implements gofs.FileReleaser.
func (h *passthroughHandle) Release(ctx context.Context) syscall.Errno {
	n := h.node
	n.mu.Lock()
	n.ptOpen--
	n.mu.Unlock()
	return h.readHandle.Release(ctx)
}
