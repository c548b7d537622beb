package read

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/bucketfs/bucketfs/cache/internal/readpattern"
	"github.com/bucketfs/bucketfs/transfer"
)

// ErrStale means the object version a handle reads is gone from the bucket
// (it was overwritten or deleted) before its bytes were cached.
var ErrStale = errors.New("object version is gone from the bucket")

// StaleOr is err, marked ErrStale if it says the version read is gone
// from the bucket (transfer.IsStale).
func StaleOr(err error) error {
	if transfer.IsStale(err) {
		return fmt.Errorf("%w: %v", ErrStale, err)
	}
	return err
}

// Version names one version of an object in the bucket.
type Version struct {
	Name       string
	Generation int64
}

// Cache is what a handle needs of the cache that opened it, for the copy
// it reads. Its methods take the cache's own locks inside; a handle calls
// them with no lock of its own held. A direct handle (no copy) calls
// CountFetched only.
type Cache interface {
	// CheckRange checks the chunks of the copy that the n > 0 bytes at
	// off touch, reading them through f if they need a check, before
	// the handle serves them from f. ok means they may be served from
	// f. Otherwise, with a nil error, the same n bytes at off are read
	// from the bucket instead: from the version from names (the source
	// of a pending copy), or, if it is the zero Version, from the
	// handle's own; a non-nil error (the file is held as damaged) is
	// what the read answers, unchanged. It may do disk I/O.
	CheckRange(f *os.File, off, n int64) (ok bool, from Version, err error)

	// Promote makes dl, the copy's download, fetch the whole object in
	// the background, unless the copy no longer has it (it was retired
	// meanwhile). It is called at most once per handle.
	Promote(dl *transfer.Download)

	// Release gives up the handle's hold on the copy: the last one lets
	// the copy be evicted. It is called exactly once, by Close, after the
	// handle's file is closed.
	Release()

	// CountRead counts n bytes served from the local file.
	CountRead(n int64)

	// CountFetched counts n bytes the handle fetched from the bucket
	// itself (not through its download), for why.
	CountFetched(why transfer.FetchReason, n int64)
}

// RangeReader is the part of the bucket a handle reads from directly
// (transfer.Bucket's ReadRange).
type RangeReader interface {
	ReadRange(ctx context.Context, name string, gen, off, length int64, w io.Writer) (int64, error)
}

// Params are the plain values a handle is made from, as the cache found
// them at the open.
type Params struct {
	Cache  Cache
	Bucket RangeReader // for the reads that go to the bucket directly
	// File is the local copy, which the handle owns (Close closes it);
	// nil: the object is read from the bucket directly, uncached.
	File *os.File
	// Download fills the copy; nil when the copy was complete at the
	// open, or for a direct handle.
	Download   *transfer.Download
	Name       string
	Generation int64
	Size       int64
	ChunkSize  int64 // the cache's chunk size: the download's unit

	Encoded  bool // the object is stored with a Content-Encoding: read its stored bytes
	Complete bool // the copy was complete when the handle was opened
	// Verify: the copy's chunks are being checked; each is checked
	// (Cache.CheckRange) before it is served.
	Verify bool
	// ByEvidence: the download fetches what is read until the reads
	// show the object is read broadly (observe).
	ByEvidence bool
}

// Handle reads one object version through the cache. Its methods are safe
// for concurrent use; Close must be called exactly once.
type Handle struct {
	cache Cache
	b     RangeReader
	f     *os.File           // nil: the object is read from the bucket directly
	dl    *transfer.Download // nil when the copy was complete at open
	name  string
	gen   int64
	size  int64
	chunk int64

	encoded  bool // the object is stored with a Content-Encoding: read its stored bytes
	complete bool // the copy was complete when the handle was opened
	verify   bool // its chunks are being checked: each is checked before it is served
	// byEvidence: the download fetches what is read until the reads
	// show the object is read broadly (observe).
	byEvidence atomic.Bool
	evidence   readpattern.Reads
	headMu     sync.Mutex
	head       []byte // guarded by headMu: the first bytes of an uncached object, fetched by Check (head.go)
	closeOnce  sync.Once
}

// New makes the handle p describes.
func New(p Params) *Handle {
	h := &Handle{
		cache: p.Cache, b: p.Bucket, f: p.File, dl: p.Download,
		name: p.Name, gen: p.Generation, size: p.Size, chunk: p.ChunkSize,
		encoded: p.Encoded, complete: p.Complete, verify: p.Verify,
	}
	h.byEvidence.Store(p.ByEvidence)
	return h
}

// Name is the object's name when the handle was opened.
func (h *Handle) Name() string { return h.name }

// Size is the object's size.
func (h *Handle) Size() int64 { return h.size }

// Generation is the object version the handle reads.
func (h *Handle) Generation() int64 { return h.gen }

// Complete reports whether the local copy was complete when the handle
// was opened (false for a direct handle).
func (h *Handle) Complete() bool { return h.complete }

// Download is the download that fills the copy the handle reads: nil
// when the copy was complete at the open, or the object is read from the
// bucket directly.
func (h *Handle) Download() *transfer.Download { return h.dl }

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
	if h.f != nil && h.dl == nil {
		if h.verify {
			if n, done, err := h.readChecked(ctx, p, off); done {
				return n, err
			}
		}
		// A complete local copy, which writers may be changing: the file
		// itself says where it ends.
		n, err := h.f.ReadAt(p, off)
		h.cache.CountRead(int64(n))
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
	if h.f == nil {
		done := h.fromHead(p, off)
		if done == n {
			return n, nil
		}
		got, err := h.b.ReadRange(transfer.Foreground(h.readCtx(ctx)), h.name, h.gen, off+int64(done), int64(n-done), &sliceWriter{buf: p[done:]})
		h.cache.CountFetched(transfer.FetchRead, got)
		if err != nil {
			return done + int(got), StaleOr(err)
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
			return 0, StaleOr(err)
		}
	}
	got, err := h.f.ReadAt(p, off)
	h.cache.CountRead(int64(got))
	if err == io.EOF && got == n {
		err = nil
	}
	if err != nil {
		return got, fmt.Errorf("reading cache file: %w", err)
	}
	return got, nil
}

// readChecked serves a read of a copy whose chunks are not all checked
// yet: it has the chunks it touches checked first (Cache.CheckRange). If
// one is bad (or was dropped as bad), the bytes come from the bucket
// instead, and done is true; otherwise the caller reads the file.
func (h *Handle) readChecked(ctx context.Context, p []byte, off int64) (int, bool, error) {
	if off >= h.size || len(p) == 0 {
		return 0, off >= h.size, io.EOF
	}
	n := min(int64(len(p)), h.size-off)
	ok, from, err := h.cache.CheckRange(h.f, off, n)
	if err != nil {
		return 0, true, err
	}
	if ok {
		return 0, false, nil
	}
	src, gen := h.name, h.gen
	if from.Name != "" {
		src, gen = from.Name, from.Generation
	}
	got, err := h.b.ReadRange(transfer.Foreground(h.readCtx(ctx)), src, gen, off, n, &sliceWriter{buf: p[:n]})
	h.cache.CountFetched(transfer.FetchRead, got)
	if err != nil {
		return int(got), true, StaleOr(err)
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
	if h.complete || h.size == 0 || (h.f != nil && h.dl == nil) {
		return nil
	}
	if h.f == nil {
		return h.readHead(ctx)
	}
	if h.byEvidence.Load() {
		// What the first read wants is not known: no chunk is fetched
		// for a check (observe.go).
		return StaleOr(h.dl.Probe(h.readCtx(ctx)))
	}
	for i, ok := range h.dl.Present() {
		if !ok {
			// The download's chunks are the cache's chunk size (a copy
			// of another size is fetched again whole).
			// Only that the version is there: an object checked whole
			// before it is shown is not waited for (the reads do).
			return StaleOr(h.dl.EnsureBegun(ctx, int64(i)*h.chunk))
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

// Close releases the handle. An entry no handle holds may be evicted.
func (h *Handle) Close() error {
	h.closeOnce.Do(func() {
		if h.f != nil {
			h.f.Close()
			h.cache.Release()
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
