package fs

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/bucketfs/bucketfs/cache"
	"github.com/bucketfs/bucketfs/transfer"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// fileNode is one object shown as a regular file.
type fileNode struct {
	gofs.Inode
	fsys *FS
	name string // object name

	mu       sync.Mutex
	attrs    transfer.ObjectAttrs // guarded by mu
	attrsAt  time.Time            // guarded by mu: when attrs were fetched
	openGen  int64                // guarded by mu: generation the kernel's page cache holds
	ptGen    int64                // guarded by mu: generation of the open passthrough handles
	ptHandle int                  // guarded by mu: passthrough handles open
}

var (
	_ gofs.NodeGetattrer = (*fileNode)(nil)
	_ gofs.NodeOpener    = (*fileNode)(nil)
	_ gofs.NodeStatfser  = (*fileNode)(nil)
)

func (n *fileNode) setAttrs(a transfer.ObjectAttrs) {
	n.mu.Lock()
	n.attrs, n.attrsAt = a, time.Now()
	n.mu.Unlock()
}

// currentAttrs returns the object's attributes, asking the bucket (or a
// fresher listing) once they are older than the metadata TTL.
func (n *fileNode) currentAttrs(ctx context.Context) (transfer.ObjectAttrs, error) {
	n.mu.Lock()
	a, at := n.attrs, n.attrsAt
	n.mu.Unlock()
	if time.Since(at) < n.fsys.opts.MetadataTTL {
		return a, nil
	}
	c, err := n.fsys.meta.resolve(ctx, n.name, n.fsys.warnOnce)
	if err != nil {
		return a, err
	}
	if c.kind != kindFile {
		return a, syscall.ENOENT
	}
	n.setAttrs(c.attrs)
	return c.attrs, nil
}

// Getattr implements gofs.NodeGetattrer.
func (n *fileNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := fh.(fileHandle); ok {
		// An open file shows the version it reads.
		n.fsys.fillFile(&out.Attr, h.attrs())
		out.SetTimeout(n.fsys.opts.MetadataTTL)
		return 0
	}
	a, err := n.currentAttrs(ctx)
	if err != nil {
		return n.fsys.errno(ctx, "getattr", n.name, err)
	}
	n.fsys.fillFile(&out.Attr, a)
	out.SetTimeout(n.fsys.opts.MetadataTTL)
	return 0
}

// Open implements gofs.NodeOpener.
func (n *fileNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		// Writing needs the write-back path, which this build does not have.
		return nil, 0, syscall.EROFS
	}
	a, err := n.currentAttrs(ctx)
	if err != nil {
		return nil, 0, n.fsys.errno(ctx, "open", n.name, err)
	}
	ch, err := n.fsys.cache.Open(ctx, a)
	if err != nil {
		return nil, 0, n.fsys.errno(ctx, "open", n.name, err)
	}
	h := &readHandle{node: n, h: ch, a: a}

	n.mu.Lock()
	defer n.mu.Unlock()
	var fuseFlags uint32
	if n.openGen == a.Generation {
		fuseFlags |= fuse.FOPEN_KEEP_CACHE
	}
	n.openGen = a.Generation
	// The kernel keeps one backing file per inode: a passthrough handle may
	// only be given while no other version is open that way.
	if _, ok := ch.PassthroughFd(); ok && n.fsys.opts.Passthrough && (n.ptHandle == 0 || n.ptGen == a.Generation) {
		n.ptHandle++
		n.ptGen = a.Generation
		return &passthroughHandle{readHandle: h}, fuseFlags, 0
	}
	return h, fuseFlags, 0
}

// Statfs implements gofs.NodeStatfser.
func (n *fileNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	statfs(out)
	return 0
}

// fileHandle is what every handle of a fileNode offers.
type fileHandle interface {
	attrs() transfer.ObjectAttrs
}

// readHandle reads one object version through the cache.
type readHandle struct {
	node *fileNode
	h    *cache.Handle
	a    transfer.ObjectAttrs
}

var (
	_ gofs.FileReader   = (*readHandle)(nil)
	_ gofs.FileReleaser = (*readHandle)(nil)
	_ gofs.FileFlusher  = (*readHandle)(nil)
)

func (h *readHandle) attrs() transfer.ObjectAttrs { return h.a }

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
	n.ptHandle--
	n.mu.Unlock()
	return h.readHandle.Release(ctx)
}
