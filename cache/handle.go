package cache

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/bucketfs/bucketfs/cache/internal/integrity"
	"github.com/bucketfs/bucketfs/cache/internal/readpattern"
	"github.com/bucketfs/bucketfs/transfer"
)

// Handle reads one object version through the cache. Its methods are safe
// for concurrent use; Close must be called exactly once.
type Handle struct {
	c    *Cache
	e    *entry // nil: the object is read from the bucket directly
	f    *os.File
	dl   *transfer.Download // nil when the copy was complete at open
	name string
	gen  int64
	size int64

	encoded  bool // the object is stored with a Content-Encoding: read its stored bytes
	complete bool // the copy was complete when the handle was opened
	verify   bool // its chunks are being checked: each is checked before it is served (checksum.go)
	// byEvidence: the download fetches what is read until the reads
	// show the object is read broadly (fetch.go).
	byEvidence atomic.Bool
	evidence   readpattern.Reads
	headMu     sync.Mutex
	head       []byte // guarded by headMu: the first bytes of an uncached object, fetched by Check (head.go)
	closeOnce  sync.Once
}

// Size is the object's size.
func (h *Handle) Size() int64 { return h.size }

// Generation is the object version the handle reads.
func (h *Handle) Generation() int64 { return h.gen }

// PassthroughFd returns the local file's descriptor when the whole
// version was cached, and checked, at open, so that the kernel can read
// it directly. The descriptor stays valid until Close.
func (h *Handle) PassthroughFd() (int, bool) {
	if !h.complete || h.verify || h.f == nil {
		return -1, false
	}
	return int(h.f.Fd()), true
}

// ReadAt reads len(p) bytes at off, waiting only for the chunks it
// touches (they are fetched ahead of the background download). It returns
// io.EOF at or past the end, ErrStale if the version is gone from the
// bucket, or the error of the fetch it waited for.
func (h *Handle) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if h.e != nil && h.dl == nil {
		if h.verify {
			if n, done, err := h.readChecked(ctx, p, off); done {
				return n, err
			}
		}
		// A complete local copy, which writers may be changing: the file
		// itself says where it ends.
		n, err := h.f.ReadAt(p, off)
		h.c.readBytes.Add(int64(n))
		if err == io.EOF && n > 0 {
			err = nil
		}
		return n, err
	}
	if off >= h.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), h.size-off))
	p = p[:n]
	if h.e == nil {
		done := h.fromHead(p, off)
		if done == n {
			return n, nil
		}
		got, err := h.c.b.ReadRange(transfer.Foreground(h.readCtx(ctx)), h.name, h.gen, off+int64(done), int64(n-done), &sliceWriter{buf: p[done:]})
		h.c.countFetched(transfer.FetchRead, got)
		if err != nil {
			return done + int(got), staleOr(err)
		}
		if done+int(got) != n {
			return done + int(got), io.ErrUnexpectedEOF
		}
		return n, nil
	}
	if h.dl != nil {
		ensure := h.dl.Ensure
		if h.observe(off, int64(n)) {
			ensure = h.dl.EnsureInOrder
		}
		if err := ensure(ctx, off, int64(n)); err != nil {
			return 0, staleOr(err)
		}
	}
	got, err := h.f.ReadAt(p, off)
	h.c.readBytes.Add(int64(got))
	if err == io.EOF && got == n {
		err = nil
	}
	if err != nil {
		return got, fmt.Errorf("reading cache file: %w", err)
	}
	return got, nil
}

// readChecked serves a read of a copy whose chunks are not all checked
// yet: it checks the chunks it touches first. If one is bad (or was
// dropped as bad), the bytes come from the bucket instead, and done is
// true; otherwise the caller reads the file.
func (h *Handle) readChecked(ctx context.Context, p []byte, off int64) (int, bool, error) {
	if off >= h.size || len(p) == 0 {
		return 0, off >= h.size, io.EOF
	}
	n := min(int64(len(p)), h.size-off)
	h.c.mu.Lock()
	chunk := h.e.rec.ChunkSize
	src, gen := h.name, h.gen
	if h.e.rec.PendingCopy() {
		src, gen = h.e.rec.CopyFrom, h.e.rec.CopyGen
	}
	h.c.mu.Unlock()
	first, last := integrity.Touched(off, n, chunk)
	good := h.c.checkChunks(h.e, h.f, first, last)
	if !slices.Contains(good, false) {
		return 0, false, nil
	}
	h.c.mu.Lock()
	why := h.e.rec.Damaged
	h.c.mu.Unlock()
	if why != "" {
		return 0, true, fmt.Errorf("%s: %w: %s", h.name, ErrDamaged, why)
	}
	got, err := h.c.b.ReadRange(transfer.Foreground(h.readCtx(ctx)), src, gen, off, n, &sliceWriter{buf: p[:n]})
	h.c.countFetched(transfer.FetchRead, got)
	if err != nil {
		return int(got), true, staleOr(err)
	}
	if got != n {
		return int(got), true, io.ErrUnexpectedEOF
	}
	return int(n), true, nil
}

// Check tells, before anything is read, whether the version the handle
// reads is still in the bucket, when reading it needs the bucket at all:
// ErrStale if it is gone (another client overwrote or deleted the object
// since its attributes were fetched). It waits for the first byte the
// copy lacks to land, which the first read would wait for anyway (not for
// the check of an object checked whole first); an object read
// directly has its first bytes fetched, which the first read takes
// (head.go): one request either way. Other errors (the bucket not
// answering) are returned too; the reads would meet them again.
func (h *Handle) Check(ctx context.Context) error {
	if h.complete || h.size == 0 || (h.e != nil && h.dl == nil) {
		return nil
	}
	if h.e == nil {
		return h.readHead(ctx)
	}
	if h.byEvidence.Load() {
		// What the first read wants is not known: no chunk is fetched
		// for a check (fetch.go).
		return staleOr(h.dl.Probe(h.readCtx(ctx)))
	}
	for i, ok := range h.dl.Present() {
		if !ok {
			// The download's chunks are the cache's chunk size (a copy
			// of another size is fetched again whole).
			// Only that the version is there: an object checked whole
			// before it is shown is not waited for (the reads do).
			return staleOr(h.dl.EnsureBegun(ctx, int64(i)*h.c.opts.ChunkSize))
		}
	}
	return nil
}

// readCtx is ctx for reads from the bucket: the stored bytes of an
// encoded object, as its size and checksum count them.
func (h *Handle) readCtx(ctx context.Context) context.Context {
	if h.encoded {
		return transfer.StoredBytes(ctx)
	}
	return ctx
}

func staleOr(err error) error {
	if transfer.IsStale(err) {
		return fmt.Errorf("%w: %v", ErrStale, err)
	}
	return err
}

// Close releases the handle. An entry no handle holds may be evicted.
func (h *Handle) Close() error {
	h.closeOnce.Do(func() {
		if h.f != nil {
			h.f.Close()
		}
		if h.e != nil {
			h.c.release(h.e)
		}
	})
	return nil
}

// sliceWriter fills a fixed buffer; writing past its end is an error.
type sliceWriter struct {
	buf []byte
	n   int
}

func (w *sliceWriter) Write(p []byte) (int, error) {
	if len(p) > len(w.buf)-w.n {
		return 0, fmt.Errorf("range read returned more bytes than asked for")
	}
	copy(w.buf[w.n:], p)
	w.n += len(p)
	return len(p), nil
}

func sortByAccessDesc(es []*entry) {
	sort.Slice(es, func(i, j int) bool { return es[i].rec.LastAccess > es[j].rec.LastAccess })
}
