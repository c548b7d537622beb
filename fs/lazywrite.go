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
// from the bucket (another client replaced the object while this mount
// still trusted its attributes) would be found at the first use instead
// of the open. So an open of a copy not held whole asks the bucket for
// the object's generation (checkLazy): a version gone answers ESTALE to
// the open, and the kernel opens the new version, with its size, as a
// new inode, as after an eager open's fetch. The kernel's size matters:
// it places O_APPEND writes and lseek(SEEK_END) at the end it knows, so
// a first write on another version of another size landed in the middle
// of it, or past its end after a hole (TestAppendAfterOverwriteWithinTTL,
// TestSeekEndWriteAfterOverwriteWithinTTL). A version that leaves the
// bucket between the open and the first use is found then: nothing was
// read or written through the handle yet, so the node takes the object's
// live version if it has the size the kernel knows (rebase); else that
// use fails with ESTALE, as does the first write after the file was
// deleted, here (an eager handle writes on into its own copy, never
// uploaded) or in the bucket. A rename between the open and the first
// use is followed: the node's name is used then.
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
	a, w, err := n.openFollowing(ctx, trunc)
	if errors.Is(err, cache.ErrStale) && !errors.Is(err, cache.ErrLeftName) {
		n.fsys.names.Stale(n.objName()) // the next lookup finds the bucket's version
		live, ok, serr := n.rebase(ctx, a)
		switch {
		case serr != nil:
			err = serr // the bucket did not say whether the object is there: not ESTALE
		case ok:
			w, err = n.fsys.cache.OpenWrite(ctx, live, trunc, false)
		}
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

// openFollowing opens n's content for writing in the cache, at the name
// and version n has now (a rename since the open moved the content, and
// the node, to another name), and returns them with the handle. If the
// file leaves that name while its copy is taken (a rename of its
// directory, say), it tries again where the node went, twice at most.
// An unlinked node has nothing to open: ESTALE.
func (n *fileNode) openFollowing(ctx context.Context, trunc bool) (transfer.ObjectAttrs, *cache.WriteHandle, error) {
	for try := 1; ; try++ {
		n.mu.Lock()
		a, unlinked := n.attrs, n.unlinked
		n.mu.Unlock()
		if unlinked {
			// Its content went with its name, and no copy was taken at the
			// open: nothing is written (an eager handle would write on into
			// its own copy, which nobody sees).
			n.fsys.log.Warn("a file opened for writing was deleted (or replaced) before its first write through that descriptor; the write fails", "object", a.Name)
			return a, nil, syscall.ESTALE
		}
		w, err := n.fsys.cache.OpenWrite(ctx, a, trunc, false)
		if !errors.Is(err, cache.ErrLeftName) || try == 3 {
			return a, w, err
		}
	}
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
// the first use (lazyWriter). It opens nothing (nil) while n's name is
// leaving (FS.nameLeaving) or gone: an unlink or rename over the name
// opens the lazy writers it finds before the file goes, and a lazy
// writer counted after that would have no copy to write into.
func (n *fileNode) openLazy() *fileHandle {
	l := &lazyWriter{node: n}
	n.mu.Lock()
	if n.leaving > 0 || n.unlinked {
		n.mu.Unlock()
		return nil
	}
	n.cacheOpen++
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

// nameLeaving is called before name is deleted or replaced (unlink,
// rename over it); the function it returns, once that is over (made or
// failed). It opens the lazy writers of the nodes of name: a descriptor
// open for writing goes on writing into its own copy of the file, as an
// eager one does, and that copy must be taken while the name still has
// the content. A failure (the version gone, no room) is logged: that
// handle's first write fails then (lazyWriter.get). Until it is over, an
// open for writing of those nodes is not lazy (openLazy): it takes its
// copy at once, before the name goes, or finds the file gone (ESTALE).
func (f *FS) nameLeaving(ctx context.Context, name string) (done func()) {
	ns := f.nodesNamed(name)
	for _, n := range ns {
		n.mu.Lock()
		n.leaving++
		n.mu.Unlock()
	}
	for _, n := range ns {
		if err := n.openLazies(ctx, false); err != nil {
			f.log.Warn("taking the copy of a file open for writing before its name goes failed; writes through that descriptor will fail", "object", name, "err", err)
		}
	}
	return func() {
		for _, n := range ns {
			n.mu.Lock()
			n.leaving--
			n.mu.Unlock()
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
// passthrough handles open eagerly). With passthrough writes, a copy the
// cache holds whole opens eagerly too, so that the kernel writes it
// directly: nothing is fetched for it. A copy not held whole opens
// lazily, through the daemon: fetching it at the open would make an
// open that writes nothing cost a download.
func (n *fileNode) lazyOK(trunc bool) bool {
	if trunc {
		return false
	}
	n.mu.Lock()
	pt, name, gen := n.ptOpen, n.name, n.attrs.Generation
	n.mu.Unlock()
	// A copy with local changes is whole already: opened at once, the
	// writer holds back their upload (cache.HasLocalContent).
	if pt > 0 || n.fsys.cache.HasLocalContent(name) {
		return false
	}
	return !n.fsys.opts.PassthroughWrites || gen <= 0 || !n.fsys.cache.HasCopy(name, gen)
}

// checkLazy makes sure that a lazy open for writing of version a of n
// finds that version at its first use (see lazyWriter). A copy the cache
// holds whole needs nothing: the first write lands on it, and a version
// replaced in the bucket meanwhile is a conflict at the upload (both
// kept). Otherwise one metadata request asks for the live generation
// now; a version gone answers ESTALE to the open, on which the kernel
// looks the name up again and opens the new version. No bytes are read.
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

// rebase points n, whose version a is gone from the bucket, at the
// object's live version, for the first use of a lazy writer (see
// lazyWriter): one metadata request. It reports false, and leaves n
// alone, if the object is gone too, its live version has another size
// than a (the kernel placed the write by a's size), or n changed since
// (renamed, deleted, another version or a writer of its own); the
// request's error if the
// bucket did not answer it (the use fails with that error, not ESTALE,
// which tells the application the file is gone). The kernel is told to drop
// the inode's attributes (not its pages: the first use may be a write,
// whose pages the kernel holds locked until it is answered); the new
// modification time makes it drop the pages at the next getattr.
func (n *fileNode) rebase(ctx context.Context, a transfer.ObjectAttrs) (transfer.ObjectAttrs, bool, error) {
	live, err := n.fsys.bucket.Stat(ctx, a.Name)
	if errors.Is(err, transfer.ErrNotExist) {
		return a, false, nil
	}
	if err != nil {
		return a, false, err
	}
	if live.Generation == a.Generation || live.Size != a.Size {
		return a, false, nil
	}
	n.mu.Lock()
	ok := !n.unlinked && n.name == a.Name && n.attrs.Generation == a.Generation && len(n.writers) == 0
	if ok {
		n.attrs = live
	}
	n.mu.Unlock()
	if !ok {
		return a, false, nil
	}
	n.fsys.retire(n.ino) // version a is not the node's any more
	n.fsys.log.Info("the version a file was opened at for writing is gone from the bucket (changed by another client); its first write goes to the version the bucket has",
		"object", a.Name, "generation", a.Generation, "live_generation", live.Generation)
	_ = n.NotifyContent(-1, 0) // nothing to drop if the kernel forgot the inode
	return live, true, nil
}

// writer returns the WriteHandle of h (opened now if h is lazy), or nil
// if h is not open for writing. trunc: the use is a truncation to 0.
func (h *fileHandle) writer(ctx context.Context, trunc bool) (*cache.WriteHandle, error) {
	if h.lazy != nil {
		return h.lazy.get(ctx, trunc)
	}
	return h.w, nil
}
