package fs

import (
	"context"
	"errors"
	"sync"
	"syscall"

	"github.com/bucketfs/bucketfs/cache"
	"github.com/bucketfs/bucketfs/transfer"
)

// lazyWriter is the cache side of a handle opened for writing without
// O_TRUNC, through the daemon: the cache's WriteHandle, which makes the
// copy whole first (a download of what is not cached), is opened at the
// handle's first write, truncation, fallocate or read, not at the open.
// An open that changes nothing (an editor's probe, touch, a program that
// opens O_RDWR and only reads the size) then costs nothing: no download,
// no upload, no new generation; touch is one metadata patch (Setattr
// sends it through cache.SetMeta, which needs no copy).
//
// The copy is still complete before the first change lands in it
// (OpenWrite), so the durability contract and the checks of the copy's
// sums are the same as for an eager open. What changes: a version gone
// from the bucket is found at the first write instead of the open, which
// then fails with ESTALE, and the name is looked up again; so does the
// first write through it after the file was deleted (an eager handle
// writes on into its own copy, never uploaded). A rename between the
// open and the first write is followed: the node's name is used then.
//
// Handles the kernel writes itself (passthrough) are opened eagerly:
// the kernel needs the descriptor at the open; so are handles of a file
// with local changes (nothing to fetch; see lazyOK).
type lazyWriter struct {
	node *fileNode

	// mu is held across the OpenWrite (a download) so that concurrent
	// first uses of one handle open one WriteHandle. It is the handle's
	// own lock, taken with no other held; fileNode.mu is taken under it,
	// briefly (fs.go, LOCK ORDER).
	mu sync.Mutex
	w  *cache.WriteHandle // guarded by mu; nil until first used
}

// get returns the handle's WriteHandle, opening it if need be. trunc
// opens it empty (the first use is a truncation to 0: no copy needed).
func (l *lazyWriter) get(ctx context.Context, trunc bool) (*cache.WriteHandle, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil {
		return l.w, nil
	}
	n := l.node
	n.mu.Lock()
	a, unlinked := n.attrs, n.unlinked
	n.mu.Unlock()
	if unlinked {
		// Its content went with its name, and no copy was taken at the
		// open: nothing is written (an eager handle would write on into
		// its own copy, which nobody sees).
		n.fsys.log.Warn("a file opened for writing was deleted (or replaced) before its first write through that descriptor; the write fails", "object", a.Name)
		return nil, syscall.ESTALE
	}
	// The node's attributes now: a rename since the open moved the
	// content (and the node) to another name.
	w, err := n.fsys.cache.OpenWrite(ctx, a, trunc, false)
	if errors.Is(err, cache.ErrStale) {
		n.fsys.names.Stale(n.objName()) // the next lookup finds the bucket's version
	}
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	if n.writers == nil {
		n.writers = map[*cache.WriteHandle]struct{}{}
	}
	n.writers[w] = struct{}{}
	n.mu.Unlock()
	l.w = w
	l.forget()
	return w, nil
}

// opened returns the WriteHandle if it was opened (nil if not).
func (l *lazyWriter) opened() *cache.WriteHandle {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w
}

// ReadAt implements dataHandle: a read through the handle needs the
// whole copy, as a write does.
func (l *lazyWriter) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	w, err := l.get(ctx, false)
	if err != nil {
		return 0, err
	}
	return w.ReadAt(ctx, p, off)
}

// Close implements dataHandle.
func (l *lazyWriter) Close() error {
	l.forget()
	if w := l.opened(); w != nil {
		return w.Close()
	}
	return nil
}

// openLazy opens n for writing through the daemon, its copy fetched at
// the first use (lazyWriter).
func (n *fileNode) openLazy() *fileHandle {
	n.mu.Lock()
	n.cacheOpen++
	n.mu.Unlock()
	l := &lazyWriter{node: n}
	n.mu.Lock()
	if n.lazies == nil {
		n.lazies = map[*lazyWriter]struct{}{}
	}
	n.lazies[l] = struct{}{}
	n.mu.Unlock()
	return &fileHandle{node: n, data: l, lazy: l, mode: ioCached}
}

// forget drops l from its node's lazy writers (opened or closed).
func (l *lazyWriter) forget() {
	l.node.mu.Lock()
	delete(l.node.lazies, l)
	l.node.mu.Unlock()
}

// openLazyWriters opens the lazy writers of the nodes of name before the
// name is deleted or replaced: a descriptor open for writing goes on
// writing into its own copy of the file, as an eager one does, and that
// copy must be taken while the name still has the content. A failure
// (the version gone, no room) is logged: that handle's first write
// fails then (lazyWriter.get).
func (f *FS) openLazyWriters(ctx context.Context, name string) {
	for _, n := range f.nodesNamed(name) {
		if err := n.openLazies(ctx, false); err != nil {
			f.log.Warn("taking the copy of a file open for writing before its name goes failed; writes through that descriptor will fail", "object", name, "err", err)
		}
	}
}

// openLazies opens every lazy writer of n (trunc: for a truncation to 0,
// so their copy can start empty) and returns the first failure. A change
// made to n by another way than these handles (a truncate(2) by path,
// which the kernel also sends for open(O_TRUNC) after the open) calls it
// first: open writers hold back the upload of that change until the
// writes through them are made, as eager ones did.
func (n *fileNode) openLazies(ctx context.Context, trunc bool) error {
	n.mu.Lock()
	ls := make([]*lazyWriter, 0, len(n.lazies))
	for l := range n.lazies {
		ls = append(ls, l)
	}
	n.mu.Unlock()
	var first error
	for _, l := range ls {
		if _, err := l.get(ctx, trunc); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// lazyOK reports whether an open for writing of n can be lazy: not with
// O_TRUNC (which empties the copy at once), and only through the daemon
// (see writeModeLocked: passthrough writers and those that must join
// passthrough handles open eagerly).
func (n *fileNode) lazyOK(trunc bool) bool {
	if trunc || n.fsys.opts.PassthroughWrites {
		return false
	}
	n.mu.Lock()
	pt, name := n.ptOpen, n.name
	n.mu.Unlock()
	// A copy with local changes is whole already: opened at once, the
	// writer holds back their upload (cache.HasLocalContent).
	return pt == 0 && !n.fsys.cache.HasLocalContent(name)
}

// checkLazy makes sure that a lazy open for writing of version a of n
// will find that version at its first use. A copy the cache holds whole
// needs nothing. Otherwise the bytes come from the bucket at the first
// write, and if another client replaced the object since n was looked up,
// that write could only fail (ESTALE, which the kernel does not retry for
// a write): so one metadata request asks for the live generation now,
// and a version that is gone answers ESTALE to the open, on which the
// kernel looks the name up again and opens the new version, as an eager
// open's fetch did. No bytes are read.
func (n *fileNode) checkLazy(ctx context.Context, a transfer.ObjectAttrs) syscall.Errno {
	if a.Generation <= 0 || n.fsys.cache.HasCopy(n.objName(), a.Generation) {
		return 0
	}
	live, err := n.fsys.bucket.Stat(ctx, n.objName())
	if errors.Is(err, transfer.ErrNotExist) || (err == nil && live.Generation != a.Generation) {
		return n.staleAtOpen(a.Generation)
	}
	if err != nil {
		return n.fsys.errno(ctx, "open", n.objName(), err)
	}
	return 0
}

// writer returns the WriteHandle of h (opened now if h is lazy), or nil
// if h is not open for writing. trunc: the use is a truncation to 0.
func (h *fileHandle) writer(ctx context.Context, trunc bool) (*cache.WriteHandle, error) {
	if h.lazy != nil {
		return h.lazy.get(ctx, trunc)
	}
	return h.w, nil
}
