package fs

import (
	"context"
	"errors"
	"io"
	"math"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/bucketfs/bucketfs/cache"
	"github.com/bucketfs/bucketfs/internal/testhook"
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
	clockLink // the bound on the kernel's nodes (reclaim.go)
	fsys      *FS
	ino       uint64 // the inode number, fixed at creation
	name      string // object name; guarded by mu (rename changes it)

	mu        sync.Mutex
	attrs     transfer.ObjectAttrs            // guarded by mu; Generation never changes
	ptOpen    int                             // guarded by mu: passthrough handles open
	ptIdle    chan struct{}                   // guarded by mu: closed when ptOpen drops to 0 (made by a writer waiting for it)
	cacheOpen int                             // guarded by mu: handles open in the kernel's caching io mode
	ptWrote   bool                            // guarded by mu: a passthrough writer was opened since the last caching open
	unlinked  bool                            // guarded by mu: the name was deleted (or renamed over); open handles live on
	replaced  *transfer.ObjectAttrs           // guarded by mu: the bucket's version after a write conflict replaced this one (conflict.go)
	writers   map[*cache.WriteHandle]struct{} // guarded by mu: handles open for writing
	lazies    map[*lazyWriter]struct{}        // guarded by mu: lazy handles open for writing, not yet used (lazywrite.go)
	movedAt   time.Time                       // guarded by mu: when this mount last renamed it (its ctime; times.go)
	leaving   int                             // guarded by mu: unlinks and renames over its name under way (FS.nameLeaving)
}

var (
	_ gofs.NodeOnForgetter = (*fileNode)(nil)
	_ gofs.NodeGetattrer   = (*fileNode)(nil)
	_ gofs.NodeOpener      = (*fileNode)(nil)
	_ gofs.NodeStatfser    = (*fileNode)(nil)
)

// setAttrs records the latest attributes of the node's generation.
func (n *fileNode) setAttrs(a transfer.ObjectAttrs) {
	n.mu.Lock()
	if n.attrs.Generation == 0 || n.attrs.Generation == a.Generation {
		n.attrs = a
	}
	n.mu.Unlock()
}

// renamed points the node at its new name; base is the generation of
// the new name that its content will replace.
func (n *fileNode) renamed(name string, base int64) {
	n.repoint(func(a *transfer.ObjectAttrs) { a.Name, a.Generation = name, base })
	n.mu.Lock()
	n.movedAt = time.Now()
	n.mu.Unlock()
}

// movedTo points the node at a: its content, under a new name and
// generation (the bucket renamed the folder it was in).
func (n *fileNode) movedTo(a transfer.ObjectAttrs) {
	n.repoint(func(cur *transfer.ObjectAttrs) { *cur = a })
}

// repoint changes the node's name and version with change.
func (n *fileNode) repoint(change func(*transfer.ObjectAttrs)) {
	n.mu.Lock()
	n.fsys.retire(n.ino) // its number is its old name's
	old := n.name
	change(&n.attrs)
	n.name = n.attrs.Name
	n.mu.Unlock()
	n.fsys.untrack(n, old)
	n.fsys.track(n)
}

// markUnlinked records that the node's name was deleted or replaced: the
// node keeps a, the attributes it had before, and no longer follows the
// name.
func (n *fileNode) markUnlinked(a transfer.ObjectAttrs) {
	n.mu.Lock()
	n.attrs, n.unlinked = a, true
	n.mu.Unlock()
	n.fsys.retire(n.ino)           // the name's next file is another inode
	n.fsys.untrack(n, n.objName()) // it no longer follows the name
}

func (n *fileNode) isUnlinked() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.unlinked
}

// fill sets out to the node's attributes a.
func (n *fileNode) fill(out *fuse.Attr, a transfer.ObjectAttrs) {
	n.fsys.fillFile(out, a, n.ino)
	n.mu.Lock()
	unlinked, moved := n.unlinked, n.movedAt
	n.mu.Unlock()
	if unlinked {
		out.Nlink = 0
	}
	if moved.After(out.ChangeTime()) {
		out.SetTimes(nil, nil, &moved) // a rename moves ctime, in memory only (times.go)
	}
}

// holds reports whether n is the file whose content is version gen of
// its name (gen <= 0: a file not in the bucket yet): the same version,
// or the version this cache uploaded of the content n was made for.
func (n *fileNode) holds(gen int64) bool {
	n.mu.Lock()
	own, unlinked, name := n.attrs.Generation, n.unlinked, n.name
	n.mu.Unlock()
	switch {
	case unlinked:
		return false
	case own == gen || gen <= 0 && own <= 0:
		// The same version, or a new file the node was made for (a
		// node of an older version of the name is another file).
		return true
	}
	sa, ours := n.fsys.cache.Settled(name)
	return ours && sa.Generation == gen && own <= gen
}

// objName is the node's current object name.
func (n *fileNode) objName() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.name
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
	n.touch()
	a := n.currentAttrs()
	if fh == nil && n.staleByPath() {
		return n.staleErrno() // a stat by path: look the name up again (conflict.go)
	}
	n.fill(&out.Attr, a)
	out.SetTimeout(n.fsys.opts.MetadataTTL)
	return 0
}

// currentAttrs is what the file looks like now: the node's version, with
// the size and time of local changes not yet in the bucket.
func (n *fileNode) currentAttrs() transfer.ObjectAttrs {
	n.mu.Lock()
	a, unlinked := n.attrs, n.unlinked
	var w *cache.WriteHandle
	for w = range n.writers {
		break // they all share one copy
	}
	n.mu.Unlock()
	if unlinked {
		if w != nil {
			a.Size = w.Size() // its own copy, written on after the unlink
		}
		return a
	}
	if la, ok := n.fsys.cache.Local(n.objName()); ok {
		a.Size, a.Updated, a.Metadata = la.Size, la.Updated, la.Metadata
	} else if sa, ok := n.fsys.cache.Settled(n.objName()); ok && a.Generation <= sa.Generation {
		// Changed here and uploaded since: the node was made with the
		// attributes of an earlier version (its creation, a rename, a
		// listing); the copy, of the version this cache wrote, knows
		// better. The generation stays the node's: it names the inode.
		a.Size, a.Metadata = sa.Size, sa.Metadata
	} else if r := n.replacedBy(); r != nil {
		// A write conflict: the bucket's version, never the base's.
		a.Size, a.Updated, a.Metadata = r.Size, r.Updated, r.Metadata
	}
	return a
}

// Open implements gofs.NodeOpener.
func (n *fileNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	ctx = uninterrupted(ctx)
	n.touch()
	if n.staleByPath() {
		return nil, 0, n.staleErrno() // conflict.go
	}
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return n.openWrite(ctx, flags&syscall.O_TRUNC != 0)
	}
	n.fsys.prefetch.opened(n.objName())
	ch, err := n.fsys.cache.Open(ctx, n.getAttrs())
	if err != nil {
		return nil, 0, n.fsys.errno(ctx, "open", n.objName(), err)
	}
	if errors.Is(ch.Check(ctx), cache.ErrStale) {
		ch.Close()
		return nil, 0, n.staleAtOpen(ch.Generation())
	}
	_, complete := ch.PassthroughFd()
	n.mu.Lock()
	pt := n.passthroughLocked(complete)
	// The inode only ever holds this version and the changes made through
	// it, so its page cache stays valid, unless the kernel wrote the cache
	// file directly (passthrough) since it was filled.
	keep := !n.ptWrote
	if !pt {
		n.ptWrote = false
	}
	n.mu.Unlock()
	mode := ioCached
	if pt {
		mode = ioPassthrough
	}
	h := &fileHandle{node: n, data: ch, mode: mode}
	if pt {
		return &passthroughHandle{fileHandle: h, fd: ch.PassthroughFd}, 0, 0
	}
	if keep {
		return h, fuse.FOPEN_KEEP_CACHE, 0
	}
	return h, 0, 0
}

// staleAtOpen answers an open whose version is gone from the bucket
// (another client overwrote or deleted the object while this mount still
// trusted its attributes). Nothing was read: the name is forgotten and the
// open answers ESTALE, on which the kernel looks the name up again, past
// its caches, and opens once more: the new version, as a new inode with
// its own size (or ENOENT). Opening the new version in this inode instead
// would mix it with the old size the kernel holds.
func (n *fileNode) staleAtOpen(gen int64) syscall.Errno {
	n.fsys.names.Stale(n.objName())
	n.fsys.log.Info("the version a file was opened at is gone from the bucket (changed by another client); opening it again by name",
		"object", n.objName(), "generation", gen)
	return syscall.ESTALE
}

// leftErrno answers an open for writing of a file deleted or renamed
// (over) while the open was being made: ESTALE, on which the kernel looks
// the name up again, past its caches. As far as anyone can tell, the
// open came after the unlink or rename: it finds what the name holds
// now (nothing, another file, or, with O_CREAT, a new one).
func (n *fileNode) leftErrno() syscall.Errno {
	n.fsys.log.Debug("a file was deleted or renamed while being opened for writing; the kernel looks the name up again", "object", n.objName())
	return syscall.ESTALE
}

// passthroughLocked decides the io mode of a new handle and counts it.
// The kernel keeps an inode in one io mode at a time: once a handle is
// open with passthrough, every other open must be passthrough too, and
// while a handle is open in caching mode, a passthrough open fails (both
// with EIO). So passthrough is used for a complete copy while no caching
// handle is open, and always while a passthrough one is.
func (n *fileNode) passthroughLocked(complete bool) bool {
	pt := n.ptOpen > 0 || (complete && n.fsys.opts.Passthrough && n.cacheOpen == 0)
	if pt {
		n.ptOpen++
	} else {
		n.cacheOpen++
	}
	return pt
}

// openWrite opens the file for writing: its copy is completed first (or
// emptied, with trunc), and every change lands in the cache at once.
func (n *fileNode) openWrite(ctx context.Context, trunc bool) (gofs.FileHandle, uint32, syscall.Errno) {
	if n.fsys.opts.ReadOnly {
		return nil, 0, syscall.EROFS
	}
	a := n.getAttrs()
	if n.lazyOK(trunc) {
		if errno := n.checkLazy(ctx, a); errno != 0 {
			return nil, 0, errno
		}
		if h := n.openLazy(); h != nil {
			return h, 0, 0 // fetched at the first use (lazywrite.go)
		}
		// The name is leaving (an unlink or a rename over it runs, or
		// ran): opened at once, the handle takes its copy with the
		// file, or finds it gone.
	}
	if n.isUnlinked() {
		return nil, 0, n.leftErrno()
	}
	h, err := n.writeHandle(ctx, a, trunc)
	if errors.Is(err, cache.ErrLeftName) {
		return nil, 0, n.leftErrno()
	}
	if errors.Is(err, cache.ErrStale) {
		// The copy is fetched whole before the open answers: nothing
		// was read or written yet.
		return nil, 0, n.staleAtOpen(a.Generation)
	}
	if err != nil {
		return nil, 0, n.fsys.errno(ctx, "open", n.objName(), err)
	}
	return h, 0, 0
}

// ptReleaseWait bounds how long a writer waits for the releases of
// passthrough handles already closed (see writeHandle).
const ptReleaseWait = 200 * time.Millisecond

// ioMode is how the kernel serves a handle's reads and writes.
type ioMode int

const (
	ioCached      ioMode = iota // through the daemon and the inode's page cache
	ioPassthrough               // by the kernel, on the cache file (FUSE passthrough)
)

// writeModeLocked decides the io mode of a new writer and counts it:
// passthrough if hidden (passthroughWriteOK said so), or if the kernel
// leaves no choice: while passthrough handles are open on the inode, it
// refuses (EINVAL) any open that is not passthrough, FOPEN_DIRECT_IO
// included. writeHandle first waits briefly for the releases of
// passthrough handles already closed.
//
// Writes the kernel makes itself (passthrough) run at local-disk speed
// and escape every limit the cache keeps (the largest file size, the
// cap, the disk's free-space floor): the daemon never sees them, and
// nothing tells the kernel a size limit for a passthrough file
// (RLIMIT_FSIZE is the writing process's, not the daemon's). Their
// growth is counted every 100 ms and when they close
// (cache.countHidden), and a file past the largest object fails at
// fsync and close (see cache/space.go).
func (n *fileNode) writeModeLocked(hidden bool) ioMode {
	if hidden || n.ptOpen > 0 {
		if n.passthroughLocked(true) { // the copy is complete once OpenWrite returns
			n.ptWrote = true
			return ioPassthrough
		}
		return ioCached
	}
	n.cacheOpen++
	return ioCached
}

// passthroughWriteOK reports whether a new writer of n may be one the
// kernel serves itself (Options.PassthroughWrites): not for a file with
// setuid or setgid set (the kernel leaves clearing them at a write to
// the daemon, with CAP_HANDLE_KILLPRIV_V2, and a passthrough write never
// reaches it: killpriv.go), nor while the cache's disk lacks the
// headroom such writers need (cache.RoomForHidden). It does I/O: call it
// with no lock held.
func (n *fileNode) passthroughWriteOK() bool {
	if !n.fsys.opts.PassthroughWrites {
		return false
	}
	var attr fuse.Attr
	n.fill(&attr, n.currentAttrs())
	if _, kill := withoutSuidgid(attr.Mode); kill {
		return false
	}
	return n.fsys.cache.RoomForHidden()
}

// writeHandle opens version a of the node's object for writing through
// the cache, in the io mode writeModeLocked chooses.
func (n *fileNode) writeHandle(ctx context.Context, a transfer.ObjectAttrs, trunc bool) (gofs.FileHandle, error) {
	hidden := n.passthroughWriteOK()
	n.mu.Lock()
	if n.ptOpen > 0 && !hidden {
		// The kernel sends releases after the close: a file read and
		// closed just now may still count here. Wait a moment for them,
		// so that a write after a read goes through the daemon.
		if n.ptIdle == nil {
			n.ptIdle = make(chan struct{})
		}
		idle := n.ptIdle
		n.mu.Unlock()
		t := time.NewTimer(ptReleaseWait)
		select {
		case <-idle:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		n.mu.Lock()
	}
	mode := n.writeModeLocked(hidden)
	n.mu.Unlock()
	pt := mode == ioPassthrough
	wh, err := n.fsys.cache.OpenWrite(ctx, a, trunc, pt)
	if err != nil {
		n.uncount(mode, nil)
		return nil, err
	}
	n.mu.Lock()
	if n.writers == nil {
		n.writers = map[*cache.WriteHandle]struct{}{}
	}
	n.writers[wh] = struct{}{}
	n.mu.Unlock()
	h := &fileHandle{node: n, data: wh, w: wh, mode: mode}
	if mode == ioPassthrough {
		return &passthroughHandle{fileHandle: h, fd: func() (int, bool) { return wh.Fd(), true }}, nil
	}
	return h, nil
}

// dropWriter takes w, about to be closed, from the node's writers: a
// getattr of a deleted file asks a writer for the size of the copy it
// writes on (currentAttrs), and a closed one no longer knows it (it
// answered the size at the unlink, and the kernel cut its next read of
// another descriptor there). The last writer of a deleted file leaves
// its size in the node's attributes.
func (n *fileNode) dropWriter(w *cache.WriteHandle) {
	if w == nil {
		return
	}
	size := w.Size()
	n.mu.Lock()
	delete(n.writers, w)
	if n.unlinked && len(n.writers) == 0 {
		n.attrs.Size = size
	}
	n.mu.Unlock()
}

func (n *fileNode) uncount(mode ioMode, w *cache.WriteHandle) {
	n.mu.Lock()
	delete(n.writers, w)
	if mode == ioPassthrough {
		n.ptOpen--
		if n.ptOpen == 0 && n.ptIdle != nil {
			close(n.ptIdle)
			n.ptIdle = nil
		}
	} else {
		n.cacheOpen--
	}
	n.mu.Unlock()
}

// Setattr implements gofs.NodeSetattrer: size changes (truncate), and
// mode, owner, access and modification times, kept in the object's
// metadata (attrs.go, times.go).
func (n *fileNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	ctx = uninterrupted(ctx)
	if _, ok := in.GetMode(); !ok && in.Valid&fuse.FATTR_KILL_SUIDGID != 0 {
		// A truncation or a chown that clears setuid and setgid
		// (killpriv.go): the mode change goes with it.
		var attr fuse.Attr
		n.fill(&attr, n.currentAttrs())
		if mode, kill := withoutSuidgid(attr.Mode); kill {
			in.Valid |= fuse.FATTR_MODE
			in.Mode = mode
		}
	}
	if size, ok := in.GetSize(); ok && !n.fsys.opts.ReadOnly && int64(size) <= n.fsys.cache.MaxFileSize() {
		// A lazy handle's writer opens before the metadata change, as an
		// eager one was: an open writer holds back the upload that change
		// queues until the truncation and the writes after it are made.
		if _, err := writerOf(ctx, fh, size == 0); err != nil {
			return n.fsys.errno(ctx, "truncate", n.objName(), err)
		}
		if err := n.openLazies(ctx, size == 0); err != nil {
			return n.fsys.errno(ctx, "truncate", n.objName(), err)
		}
	}
	if md := setattrMeta(in, true); md != nil {
		if n.fsys.opts.ReadOnly {
			return syscall.EROFS
		}
		if n.isUnlinked() {
			// Nothing of a deleted file reaches the bucket.
		} else if err := n.setMeta(ctx, md); err != nil {
			return n.fsys.errno(ctx, "setattr", n.objName(), err)
		}
	}
	if size, ok := in.GetSize(); ok {
		if n.fsys.opts.ReadOnly {
			return syscall.EROFS
		}
		if int64(size) > n.fsys.cache.MaxFileSize() || int64(size) < 0 {
			return syscall.EFBIG // before a copy is fetched to be cut
		}
		w, err := writerOf(ctx, fh, size == 0)
		if err != nil {
			return n.fsys.errno(ctx, "truncate", n.objName(), err)
		}
		if w == nil {
			wh, err := n.fsys.cache.OpenWrite(ctx, n.getAttrs(), size == 0, false)
			if err != nil {
				return n.fsys.errno(ctx, "truncate", n.objName(), err)
			}
			defer wh.Close()
			w = wh
		}
		if err := w.Truncate(int64(size)); err != nil {
			return n.fsys.errno(ctx, "truncate", n.objName(), err)
		}
	}
	n.fill(&out.Attr, n.currentAttrs())
	out.SetTimeout(n.fsys.opts.MetadataTTL)
	return 0
}

// Statfs implements gofs.NodeStatfser.
func (n *fileNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	statfs(out)
	return 0
}

// dataHandle is what a fileHandle reads through: a cache.Handle, or a
// cache.WriteHandle for handles open for writing.
type dataHandle interface {
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	Close() error
}

// fileHandle is one open file.
type fileHandle struct {
	node *fileNode
	data dataHandle
	w    *cache.WriteHandle // nil unless open for writing (eagerly)
	lazy *lazyWriter        // nil unless open for writing, lazily (lazywrite.go)
	mode ioMode             // how node counts it
}

var (
	_ gofs.FileReader    = (*fileHandle)(nil)
	_ gofs.FileWriter    = (*fileHandle)(nil)
	_ gofs.FileFlusher   = (*fileHandle)(nil)
	_ gofs.FileFsyncer   = (*fileHandle)(nil)
	_ gofs.FileReleaser  = (*fileHandle)(nil)
	_ gofs.FileGetattrer = (*fileHandle)(nil)
	_ gofs.FileAllocater = (*fileHandle)(nil)
)

// writerOf returns fh's WriteHandle (opened now if it is lazy), or nil
// if fh is not open for writing; trunc: for a truncation to 0.
func writerOf(ctx context.Context, fh gofs.FileHandle, trunc bool) (*cache.WriteHandle, error) {
	switch h := fh.(type) {
	case *fileHandle:
		return h.writer(ctx, trunc)
	case *passthroughHandle:
		return h.w, nil
	}
	return nil, nil
}

// Read implements gofs.FileReader.
func (h *fileHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	ctx = uninterrupted(ctx)
	n, err := h.data.ReadAt(ctx, dest, off)
	if err != nil && !errors.Is(err, io.EOF) && n == 0 {
		return nil, h.node.fsys.errno(ctx, "read", h.node.objName(), err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// Write implements gofs.FileWriter. The bytes land in the cache file; the
// upload happens after the last close.
func (h *fileHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	ctx = uninterrupted(ctx) // a lazy handle may fetch the copy first
	w, err := h.writer(ctx, false)
	if err != nil {
		return 0, h.node.fsys.errno(ctx, "write", h.node.objName(), err)
	}
	if w == nil {
		return 0, syscall.EBADF
	}
	n, err := w.WriteAt(data, off)
	if err != nil {
		return uint32(n), h.node.fsys.errno(ctx, "write", h.node.objName(), err)
	}
	return uint32(n), 0
}

// Flush implements gofs.FileFlusher (close(2)): the data is in the cache
// already; the upload follows the last close.
func (h *fileHandle) Flush(ctx context.Context) syscall.Errno {
	// A file the kernel writes itself (passthrough) is held to no size
	// as it grows: past the largest object, each close says so.
	if h.w != nil {
		if err := h.w.CheckSize(); err != nil {
			return h.node.fsys.errno(ctx, "close", h.node.objName(), err)
		}
	}
	return 0
}

// Fsync implements gofs.FileFsyncer: durable on local disk, and with
// --fsync=remote, in the bucket.
func (h *fileHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	ctx = uninterrupted(ctx)
	w := h.syncWriter()
	if w == nil {
		return 0
	}
	testhook.Pause("fs.fsync-writer") // tests widen the window here
	err := w.Sync()
	if errors.Is(err, os.ErrClosed) && w != h.w {
		// A writer of the node borrowed by a read-only handle, closed
		// since: its bytes are in the cache file.
		err = h.node.fsys.cache.SyncName(h.node.objName())
	}
	if err != nil {
		return h.node.fsys.errno(ctx, "fsync", h.node.objName(), err)
	}
	if h.node.fsys.opts.FsyncRemote && !w.Orphaned() {
		if err := h.node.fsys.cache.FlushName(ctx, h.node.objName()); err != nil {
			return h.node.fsys.errno(ctx, "fsync", h.node.objName(), err)
		}
	}
	return 0
}

// Allocate implements gofs.FileAllocater: fallocate(2) mode 0 (what
// posix_fallocate asks), held to the cache's limits like a write (EFBIG
// past the largest file size, ENOSPC when no room can be made). Other
// modes (keep size, punch hole, ...) are not supported (EOPNOTSUPP).
func (h *fileHandle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	ctx = uninterrupted(ctx)
	if h.w == nil && h.lazy == nil {
		return syscall.EBADF
	}
	if mode != 0 {
		return syscall.EOPNOTSUPP
	}
	if off > math.MaxInt64 || size > math.MaxInt64-off {
		return syscall.EFBIG
	}
	w, err := h.writer(ctx, false)
	if err != nil {
		return h.node.fsys.errno(ctx, "fallocate", h.node.objName(), err)
	}
	if err := w.Allocate(int64(off), int64(size)); err != nil {
		return h.node.fsys.errno(ctx, "fallocate", h.node.objName(), err)
	}
	return 0
}

// Getattr implements gofs.FileGetattrer (fstat).
func (h *fileHandle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	h.node.fill(&out.Attr, h.node.currentAttrs())
	out.SetTimeout(h.node.fsys.opts.MetadataTTL)
	return 0
}

// Release implements gofs.FileReleaser.
func (h *fileHandle) Release(ctx context.Context) syscall.Errno {
	w := h.w
	if h.lazy != nil {
		w = h.lazy.opened()
	}
	h.node.dropWriter(w) // before the close: see dropWriter
	err := h.data.Close()
	h.node.uncount(h.mode, w)
	if err != nil {
		return h.node.fsys.errno(ctx, "close", h.node.objName(), err)
	}
	return 0
}

// passthroughHandle lets the kernel read (and write) the cache file
// itself.
type passthroughHandle struct {
	*fileHandle
	fd func() (int, bool)
}

var _ gofs.FilePassthroughFder = (*passthroughHandle)(nil)

// PassthroughFd implements gofs.FilePassthroughFder.
func (h *passthroughHandle) PassthroughFd() (int, bool) { return h.fd() }
