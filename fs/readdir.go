package fs

import (
	"context"
	"sync"
	"syscall"

	"github.com/bucketfs/bucketfs/fs/names"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// OpendirHandle implements gofs.NodeOpendirHandler: an open directory
// is read as a dirHandle.
func (d *dirNode) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return &dirHandle{d: d}, 0, 0
}

// dirHandle is an open directory: ".", "..", then the names of the
// listing with local changes laid over it, each as soon as the listing
// decides it (names.Cache.Stream): a cold directory of 100,000 names
// shows its first names with the bucket's first page, and a reader takes
// them while the rest of the listing comes. The first read waits for the
// listing's first names (or its end), so that a listing that fails at
// once fails the first read, as before. A rewind (seekdir to 0, as
// rewinddir does) lists again, so that it shows names made since.
// go-fuse serialises the calls on one handle.
type dirHandle struct {
	d *dirNode
	s *dirStream // made by the first read or seek
}

var (
	_ gofs.FileReaddirenter = (*dirHandle)(nil)
	_ gofs.FileSeekdirer    = (*dirHandle)(nil)
	_ gofs.FileReleasedirer = (*dirHandle)(nil)
	_ gofs.FileLookuper     = (*dirHandle)(nil)
)

func (h *dirHandle) stream() syscall.Errno {
	if h.s != nil {
		return 0
	}
	h.d.touch()
	s := &dirStream{d: h.d}
	if errno := s.rewind(); errno != 0 {
		return errno
	}
	h.s = s
	return 0
}

// Readdirent implements gofs.FileReaddirenter.
func (h *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if errno := h.stream(); errno != 0 {
		return nil, errno
	}
	if !h.s.HasNext() {
		return nil, 0
	}
	e, errno := h.s.Next()
	return &e, errno
}

// Seekdir implements gofs.FileSeekdirer; offset 0 lists again.
func (h *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if h.s == nil {
		// A seek before the first read (an offset from an earlier open
		// of the directory): a new listing, then the seek within it.
		if errno := h.stream(); errno != 0 || off == 0 {
			return errno
		}
	}
	return h.s.Seekdir(ctx, off)
}

// Releasedir implements gofs.FileReleasedirer: a listing still under way
// ends, as nobody reads it.
func (h *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	if h.s != nil {
		h.s.Close()
	}
}

// Lookup implements gofs.FileLookuper: READDIRPLUS asks it for each name
// it hands the kernel. Once the listing is remembered, the name is looked
// up as any other (from memory). Before, the entry goes without its
// attributes (the kernel takes an entry with no node as a plain one): a
// lookup of a name while its directory's listing is under way would ask
// the bucket for each name the listing is about to answer.
func (h *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if h.s == nil || !h.s.run.answers() {
		return nil, syscall.EAGAIN
	}
	return h.d.Lookup(ctx, name, out)
}

// dirEntry is the entry of seg, a child c of the directory d whose
// prefix was prefix when the listing began.
func (d *dirNode) dirEntry(prefix, seg string, c names.Entry) fuse.DirEntry {
	f := d.fsys
	e := fuse.DirEntry{Name: seg}
	switch {
	case c.Kind == names.Dir:
		e.Mode = syscall.S_IFDIR
		if in := d.GetChild(seg); in != nil && in.IsDir() {
			e.Ino = in.StableAttr().Ino // the inode the kernel has for the name
		} else {
			e.Ino = hashIno('d', prefix+seg+"/", 0)
		}
	case isSymlink(c.Attrs):
		e.Mode = syscall.S_IFLNK
		e.Ino = f.listedIno(c.Attrs)
	default:
		e.Mode = fileType(c.Attrs) // a regular or special file
		if in := d.GetChild(seg); in != nil {
			if fn, ok := in.Operations().(*fileNode); ok {
				e.Ino = fn.ino // the inode the kernel has for the name
			}
		}
		if e.Ino == 0 {
			e.Ino = f.listedIno(c.Attrs)
		}
	}
	return e
}

// dirStream is one open directory's listing, read by its dirHandle; the
// listing's own goroutine fills its dirRun.
type dirStream struct {
	d    *dirNode
	run  *dirRun
	next int // the entry the next read returns
}

// dirRun is one listing of a directory, made by its own goroutine while
// the handle reads it. Lock order: mu is a leaf.
type dirRun struct {
	cancel context.CancelFunc // ends the listing: the handle is done with it

	mu        sync.Mutex
	grew      sync.Cond       // on mu: entries grew, or the listing ended
	entries   []fuse.DirEntry // guarded by mu: ".", "..", then the children decided so far
	ended     bool            // guarded by mu: the listing is over
	known     bool            // guarded by mu: the listing is in memory: lookups are answered from it
	errno     syscall.Errno   // guarded by mu: why it ended early (0: it is whole)
	errorSent bool            // guarded by mu: errno was handed to a read
}

// rewind starts a new listing, ends the one before, and waits for the
// new one's first names.
func (s *dirStream) rewind() syscall.Errno {
	if s.run != nil {
		s.run.cancel()
	}
	d := s.d
	self := d.StableAttr().Ino
	parent := self
	if _, p := d.Parent(); p != nil {
		parent = p.StableAttr().Ino
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &dirRun{cancel: cancel, entries: []fuse.DirEntry{
		{Name: ".", Mode: syscall.S_IFDIR, Ino: self},
		{Name: "..", Mode: syscall.S_IFDIR, Ino: parent}}}
	r.grew.L = &r.mu
	s.run, s.next = r, 0
	go r.list(ctx, d)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waitLocked(3) == 2 && r.errno != 0 {
		cancel()
		return r.errno
	}
	return 0
}

// list lists d into r.
func (r *dirRun) list(ctx context.Context, d *dirNode) {
	f := d.fsys
	prefix := d.prefix() // one value for the whole listing, even if a rename moves d meanwhile
	l, err := f.names.Stream(ctx, prefix, f.warnOnce, func(seg string, c names.Entry) {
		e := d.dirEntry(prefix, seg, c)
		r.mu.Lock()
		r.entries = append(r.entries, e)
		r.grew.Broadcast()
		r.mu.Unlock()
	}, func() {
		r.mu.Lock()
		r.known = true
		r.mu.Unlock()
	})
	var errno syscall.Errno
	switch {
	case err != nil && ctx.Err() != nil:
		errno = syscall.EINTR // ended by the handle: nobody reads it, and nothing is logged
	case err != nil:
		errno = f.errno(ctx, "readdir", prefix, err)
	default:
		f.prefetch.listed(prefix, l)
	}
	r.mu.Lock()
	r.ended, r.errno = true, errno
	r.grew.Broadcast()
	r.mu.Unlock()
}

// answers reports whether the listing is in memory, so that a lookup of
// one of its names asks nobody.
func (r *dirRun) answers() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.known
}

// waitLocked waits until the run has n entries or has ended, and
// returns how many it has.
func (r *dirRun) waitLocked(n int) int {
	for len(r.entries) < n && !r.ended {
		r.grew.Wait()
	}
	return len(r.entries)
}

// HasNext waits until the next entry came or the listing ended: true if
// there is an entry to read, or an error the reads were not told yet.
func (s *dirStream) HasNext() bool {
	r := s.run
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waitLocked(s.next+1) > s.next || r.errno != 0 && !r.errorSent
}

func (s *dirStream) Next() (fuse.DirEntry, syscall.Errno) {
	r := s.run
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.next >= len(r.entries) {
		r.errorSent = true
		return fuse.DirEntry{}, r.errno // the listing failed after its first names
	}
	e := r.entries[s.next]
	s.next++
	e.Off = uint64(s.next)
	return e, 0
}

// Close ends the listing if it is still under way: nobody reads it.
func (s *dirStream) Close() { s.run.cancel() }

// Seekdir moves to offset off; 0 lists again.
func (s *dirStream) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off == 0 {
		return s.rewind()
	}
	r := s.run
	r.mu.Lock()
	have := r.waitLocked(int(min(off, 1<<40)))
	r.mu.Unlock()
	if off > uint64(have) {
		return syscall.EINVAL
	}
	s.next = int(off)
	return 0
}
