package write

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/bucketfs/bucketfs/cache/internal/space"
)

// Cache is what a handle needs of the cache that opened it, for the
// entry of its file. Each method is one critical section of the cache's
// lock unless its contract says more, and takes that lock inside; a
// handle calls them with nothing held. "The entry" is the one the
// handle's file has when the method runs: a rename moves the handle to
// its new name's, and a deletion orphans it, from then on a change
// through it touches no entry (its bytes count for nothing).
type Cache interface {
	// MaxFileSize is the largest file the cache holds.
	MaxFileSize() int64

	// Name is the name of the handle's file now, for its errors.
	Name() string

	// Grow reserves room for the file growing to size bytes, before the
	// change begins: it may evict, send changed files and wait for
	// room, and then fails (ErrNoSpace). Room not used is given back
	// when the change ends (End) or does not begin (Unreserve).
	Grow(size int64) error

	// Begin begins a change that touches the bytes span says, or, with
	// a nil span, that the kernel makes where the cache cannot see
	// (every chunk's sum is forgotten). The first change of a clean
	// copy is journaled as dirty, and a change of chunks not yet
	// marked written is journaled as such, before Begin returns: it may
	// append to the journal between its holds of the lock, and waits
	// for another change's first record. On nil the change is in
	// flight until End; on an error nothing is in flight.
	Begin(span Span) error

	// Unreserve gives back the room Grow reserved for a change whose
	// Begin failed.
	Unreserve()

	// End ends a change begun by Begin; the file now reaches at least
	// minSize bytes. It ends in the entry the handle has now, and
	// settles what the change reserved. After a Begin with a nil span
	// that failed, it does nothing.
	End(minSize int64)

	// Resize records size as the file's size (a truncation done, or a
	// hidden handle's file at its close).
	Resize(size int64)

	// CheckRead checks the chunks the n bytes at off touch before they
	// are read from f, reading them through f if they need a check (it
	// does disk I/O between its holds of the lock). A non-nil error is
	// what the read answers: the file is held as damaged, or a chunk
	// checked bad.
	CheckRead(f *os.File, off, n int64) error

	// CountRead counts n bytes read from the local file.
	CountRead(n int64)

	// Size is the size the entry records, and whether the handle is
	// orphaned (then the file says its size).
	Size() (size int64, orphan bool)

	// Record makes the entry's record durable against power loss: it
	// journals it and syncs the journal. The file's bytes are synced
	// before. An orphaned handle's file has no record: then it does
	// nothing and reports orphan.
	Record() (orphan bool, err error)

	// Watch takes up the mark of the hidden handle's open, once its
	// change has begun: false if another change, an upload or a rename
	// reached the entry since the open, and then nothing is undone at
	// the close.
	Watch() bool

	// Untouched ends the hidden handle's change at its close, undoing
	// it if nothing was written: holds says that a stat of f, made
	// just before, shows the mark. It reports whether it did; then it
	// has journaled the record as it was before the open and set f's
	// time back, and End is not called. Called only after Watch
	// returned true.
	Untouched(f *os.File, holds bool) bool

	// Close lets go of the entry: called once, after the file is
	// closed. The last writer's close queues the upload.
	Close()
}

// A Span is the bytes [from, to) a change touches, said of the size the
// copy has when the change begins. The cache calls it under its lock:
// it computes, nothing more.
type Span func(size int64) (from, to int64)

// Handle reads and writes the local copy of one object. Its methods are
// safe for concurrent use; Close must be called exactly once.
//
// A handle belongs to a file, not to a name, as a descriptor does: when
// the file is renamed, the handle moves to the new name's entry and its
// writes are uploaded under that name; when the file is deleted (or
// renamed over) while the handle is open, the handle is orphaned: reads
// and writes go on in its own copy, which is never uploaded and goes
// away with the last close.
type Handle struct {
	cache     Cache
	f         *os.File
	hidden    atomic.Bool // writes bypass WriteAt (passthrough): one change from open to Close; read by the cache's count of hidden writers meanwhile
	mark      *Mark       // a hidden open of a clean copy: undone at Close if nothing was written (mark.go)
	closeOnce sync.Once
}

// New makes the handle of f, opened for reading and writing, which the
// handle owns (Close closes it). A hidden handle's change is begun by
// BeginHidden before the handle is handed out.
func New(c Cache, f *os.File, hidden bool) *Handle {
	h := &Handle{cache: c, f: f}
	h.hidden.Store(hidden)
	return h
}

// Fd returns the descriptor of the local copy, open for reading and
// writing, for FUSE passthrough; valid until Close.
func (h *Handle) Fd() int { return int(h.f.Fd()) }

// File is the local copy, for the cache (an exchange syncs and stats
// it; hidden writers are counted by its size); valid until Close.
func (h *Handle) File() *os.File { return h.f }

// Hidden reports whether the kernel writes the file (passthrough).
func (h *Handle) Hidden() bool { return h.hidden.Load() }

// BeginHidden begins the change of a hidden handle: the kernel writes
// the file directly, one change from the open until Close, which ends
// it. The daemon cannot see which chunks change: their sums describe
// the file no longer. m, if not nil, watches an open that may write
// nothing (mark.go): set on the file first, taken up once the change
// has begun. If the change cannot begin, the handle is closed.
func (h *Handle) BeginHidden(m *Mark) error {
	if m != nil && !m.Start(h.f) {
		m = nil
	}
	err := h.cache.Begin(nil)
	if err == nil && m != nil && h.cache.Watch() {
		h.mark = m
	}
	if err != nil {
		h.hidden.Store(false)
		h.Close()
	}
	return err
}

// Size is the current size of the local copy.
func (h *Handle) Size() int64 {
	size, orphan := h.cache.Size()
	if orphan {
		if st, err := h.f.Stat(); err == nil {
			return st.Size()
		}
	}
	return size
}

// Orphaned reports whether the file was deleted while the handle was open.
func (h *Handle) Orphaned() bool {
	_, orphan := h.cache.Size()
	return orphan
}

// ReadAt reads the local copy; ctx is not used (local I/O). Chunks not
// written here are checked against their sums first, once: a damaged
// one holds the file and answers ErrDamaged.
func (h *Handle) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := h.cache.CheckRead(h.f, off, int64(len(p))); err != nil {
		return 0, err
	}
	n, err := h.f.ReadAt(p, off)
	h.cache.CountRead(int64(n))
	return n, err
}

// WriteAt writes p at off. When it returns, the change survives a crash
// of the process (the cache's durability contract). A write that would
// pass MaxFileSize is cut short at it (as a local file system cuts a
// write at its largest file size); one that starts there fails with
// ErrTooBig.
func (h *Handle) WriteAt(p []byte, off int64) (int, error) {
	if limit := h.cache.MaxFileSize(); off+int64(len(p)) > limit {
		if off >= limit || off < 0 {
			return 0, h.tooBig(off + int64(len(p)))
		}
		p = p[:limit-off]
	}
	end := off + int64(len(p))
	if err := h.begin(end, func(size int64) (int64, int64) { return min(off, size), end }); err != nil {
		return 0, err
	}
	n, err := h.f.WriteAt(p, off)
	h.cache.End(off + int64(n))
	return n, err
}

// Truncate sets the size of the local copy; past MaxFileSize it fails
// with ErrTooBig.
func (h *Handle) Truncate(size int64) error {
	if size > h.cache.MaxFileSize() {
		return h.tooBig(size)
	}
	if err := h.begin(size, func(was int64) (int64, int64) { return min(size, was), max(size, was) }); err != nil {
		return err
	}
	err := h.f.Truncate(size)
	if err == nil {
		h.cache.Resize(size)
	}
	h.cache.End(0)
	return err
}

// Allocate makes sure the bytes [off, off+length) of the local copy
// have disk blocks (fallocate(2) mode 0): the file grows to off+length
// if it is shorter, and that growth is held to the limits like a
// write's.
func (h *Handle) Allocate(off, length int64) error {
	end := off + length
	if end > h.cache.MaxFileSize() || end < off {
		return h.tooBig(end)
	}
	if end <= h.Size() {
		// The content does not change: no change to record.
		return fallocate(h.f, off, length)
	}
	if err := h.begin(end, func(size int64) (int64, int64) { return size, end }); err != nil {
		return err
	}
	err := fallocate(h.f, off, length)
	grown := int64(0)
	if err == nil {
		grown = end
	}
	h.cache.End(grown)
	return err
}

// begin reserves room for the file reaching end, then begins a change
// of span; if it cannot begin, the room is given back.
func (h *Handle) begin(end int64, span Span) error {
	if err := h.cache.Grow(end); err != nil {
		return err
	}
	if err := h.cache.Begin(span); err != nil {
		h.cache.Unreserve()
		return err
	}
	return nil
}

func fallocate(f interface{ Fd() uintptr }, off, length int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), 0, off, length)
		if err != syscall.EINTR {
			return err
		}
	}
}

// CheckSize reports ErrTooBig if the kernel wrote the file (a hidden
// handle) past space.MaxObjectSize, which the bucket does not store: such a
// file is refused at fsync and close. Writes through WriteAt are held
// to MaxFileSize as they come.
func (h *Handle) CheckSize() error {
	if !h.hidden.Load() {
		return nil
	}
	st, err := h.f.Stat()
	if err != nil {
		return err
	}
	if st.Size() > space.MaxObjectSize {
		return ObjectTooBig(h.cache.Name(), st.Size())
	}
	return nil
}

// ErrTooBig means a write, truncation or allocation would make a file
// larger than the largest file the cache holds (Cache.MaxFileSize).
var ErrTooBig = errors.New("the file would pass the largest size the cache holds")

// tooBig is the error for a change that would make the file end bytes
// long.
func (h *Handle) tooBig(end int64) error {
	return fmt.Errorf("%s: %w (%d bytes asked, at most %d)", h.cache.Name(), ErrTooBig, end, h.cache.MaxFileSize())
}

// ObjectTooBig is the error for the file name of size bytes, past the
// largest object the bucket stores: written by the kernel (passthrough),
// which no limit of the cache holds back.
func ObjectTooBig(name string, size int64) error {
	return fmt.Errorf("%s: %w (%d bytes; a GCS object holds at most 5 TiB): truncate or delete it", name, ErrTooBig, size)
}

// Sync makes the local copy and its record durable against power loss;
// a file the kernel wrote past space.MaxObjectSize fails with ErrTooBig after
// that (CheckSize).
func (h *Handle) Sync() error {
	if err := h.f.Sync(); err != nil {
		return err
	}
	if orphan, err := h.cache.Record(); err != nil || orphan {
		return err // an orphan: a deleted file, never uploaded, whatever its size
	}
	if err := h.CheckSize(); !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil // closed since its bytes were synced: its size is its close's to check
}

// SyncFile makes the file at path durable, for an fsync through a
// handle that does not write it; a file gone meanwhile has nothing to
// sync.
func SyncFile(path string) error {
	f, err := os.Open(path)
	if err == nil {
		err = f.Sync()
		f.Close()
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Close releases the handle. The last writer to close queues the upload,
// after the write-back delay.
func (h *Handle) Close() error {
	var err error
	h.closeOnce.Do(func() {
		if h.hidden.Load() && !h.closeUntouched() {
			// The kernel wrote the file directly: take its size from it.
			if st, serr := h.f.Stat(); serr == nil {
				h.cache.Resize(st.Size())
			}
			h.cache.End(0)
		}
		err = h.f.Close()
		h.cache.Close()
	})
	return err
}

// closeUntouched ends the change of a hidden handle whose mark the cache
// watches, undoing it if nothing was written (mark.go), and reports
// whether it did.
func (h *Handle) closeUntouched() bool {
	if h.mark == nil {
		return false
	}
	st, err := h.f.Stat()
	return h.cache.Untouched(h.f, err == nil && h.mark.Holds(st))
}
