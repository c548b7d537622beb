package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

const testChunk = 4096

// memFile is an in-memory io.WriterAt of fixed size, safe for concurrent
// use. Writes outside it fail.
type memFile struct {
	mu sync.Mutex
	b  []byte
}

func newMemFile(size int, fill byte) *memFile {
	return &memFile{b: bytes.Repeat([]byte{fill}, size)}
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if off < 0 || off+int64(len(p)) > int64(len(m.b)) {
		return 0, fmt.Errorf("memFile: write of %d bytes at %d outside size %d", len(p), off, len(m.b))
	}
	return copy(m.b[off:], p), nil
}

func (m *memFile) bytes(off, n int64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.b[off : off+n])
}

// rangeRecorder is a hook that records the first byte of every media read.
type rangeRecorder struct {
	mu     sync.Mutex
	starts []int64
}

func (r *rangeRecorder) hook(req *http.Request) (int, bool) {
	if isMediaRead(req) {
		r.mu.Lock()
		r.starts = append(r.starts, rangeStart(req))
		r.mu.Unlock()
	}
	return 0, false
}

func (r *rangeRecorder) sorted() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.starts))
}

// chunkStarts returns the offsets of the chunks i for which want(i).
func chunkStarts(n int, want func(i int) bool) []int64 {
	var out []int64
	for i := range n {
		if want(i) {
			out = append(out, int64(i)*testChunk)
		}
	}
	return out
}

func TestDownloadWhole(t *testing.T) {
	tests := []struct {
		name        string
		size        int
		parallelism int
		chunks      int
	}{
		{"10 chunks and a partial one, 1 worker", 10*testChunk + 1000, 1, 11},
		{"10 chunks and a partial one, 3 workers", 10*testChunk + 1000, 3, 11},
		{"more workers than chunks", 2*testChunk + 1, 16, 3},
		{"exact multiple of the chunk size", 4 * testChunk, 2, 4},
		{"smaller than a chunk", 100, 4, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			emu := startEmulator(t)
			g := newTestGCS(t, emu)
			data := testutil.Pattern(tt.size, 20)
			gen := put(t, emu, "obj", data)
			rec := &rangeRecorder{}
			emu.SetHook(rec.hook)
			ctx := testutil.Ctx(t, 60*time.Second)

			dst := newMemFile(tt.size, 0)
			d := NewDownload(g, "obj", gen, int64(tt.size), dst, nil, DownloadOptions{ChunkSize: testChunk, Parallelism: tt.parallelism})
			defer d.Stop()
			if d.NumChunks() != tt.chunks {
				t.Fatalf("NumChunks = %d, want %d", d.NumChunks(), tt.chunks)
			}
			if got := emu.TotalMediaReads(); got != 0 {
				t.Errorf("NewDownload made %d media reads before Start, want 0", got)
			}
			d.Start()
			d.Start() // a second Start does nothing
			waitClosed(t, ctx, d.Complete(), "the download to complete")
			waitClosed(t, ctx, d.Idle(), "the background walk to end")
			if err := d.Err(); err != nil {
				t.Errorf("Err = %v after a complete download", err)
			}
			if !bytes.Equal(dst.bytes(0, int64(tt.size)), data) {
				t.Errorf("downloaded bytes differ from the object")
			}
			if got := emu.MediaReads(bucketName, "obj"); got != int64(tt.chunks) {
				t.Errorf("MediaReads = %d, want one per chunk (%d)", got, tt.chunks)
			}
			if got, want := rec.sorted(), chunkStarts(tt.chunks, func(int) bool { return true }); !slices.Equal(got, want) {
				t.Errorf("range reads started at %v, want %v", got, want)
			}
			if p := d.Present(); slices.Contains(p, false) {
				t.Errorf("Present = %v after completion", p)
			}
		})
	}
}

func TestDownloadEmptyObject(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	gen := put(t, emu, "empty", nil)
	ctx := testutil.Ctx(t, 30*time.Second)
	d := NewDownload(g, "empty", gen, 0, newMemFile(0, 0), nil, DownloadOptions{ChunkSize: testChunk, Parallelism: 2})
	defer d.Stop()
	waitClosed(t, ctx, d.Complete(), "an empty download to be complete")
	d.Start()
	waitClosed(t, ctx, d.Idle(), "the walk of an empty download to end")
	if err := d.Ensure(ctx, 0, 10); err != nil {
		t.Errorf("Ensure on an empty object: %v", err)
	}
	if got := emu.TotalMediaReads(); got != 0 {
		t.Errorf("an empty download made %d media reads, want 0", got)
	}
}

// TestDownloadEnsureAheadOfWalk: a reader's chunk is fetched at once, even
// while the background walk is stuck on another chunk.
func TestDownloadEnsureAheadOfWalk(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	const size = 10*testChunk + 1000
	data := testutil.Pattern(size, 21)
	gen := put(t, emu, "obj", data)
	ctx := testutil.Ctx(t, 60*time.Second)
	parked, release := parkFirstRead(emu)
	var released sync.Once
	defer released.Do(func() { close(release) })

	dst := newMemFile(size, 0)
	d := NewDownload(g, "obj", gen, size, dst, nil, DownloadOptions{ChunkSize: testChunk, Parallelism: 1})
	defer d.Stop()
	d.Start()
	waitClosed(t, ctx, parked, "the walk's first request to reach the server")

	// The last chunk, and a range that straddles chunks 4 and 5.
	lastOff := int64(10 * testChunk)
	if err := d.Ensure(ctx, lastOff+500, 10); err != nil {
		t.Fatalf("Ensure of the last chunk: %v", err)
	}
	if got := dst.bytes(lastOff+500, 10); !bytes.Equal(got, data[lastOff+500:lastOff+510]) {
		t.Errorf("after Ensure the bytes asked for in the last chunk are wrong")
	}
	if err := d.Ensure(ctx, 5*testChunk-10, 20); err != nil {
		t.Fatalf("Ensure across chunks 4 and 5: %v", err)
	}
	if got := dst.bytes(5*testChunk-10, 20); !bytes.Equal(got, data[5*testChunk-10:5*testChunk+10]) {
		t.Errorf("after Ensure the bytes across chunks 4 and 5 are wrong")
	}
	select {
	case <-d.Idle():
		t.Fatal("the walk ended while its first request was held at the server")
	default:
	}
	// Ensure returns once its bytes have landed, so chunks 4, 5 and 10 may
	// still be finishing; the walk's chunks 0 and 1 are not there.
	p := d.Present()
	if p[0] || p[1] {
		t.Errorf("Present = %v, want neither chunk 0 nor 1 while the walk is held", p)
	}

	released.Do(func() { close(release) })
	waitClosed(t, ctx, d.Idle(), "the walk to end")
	waitClosed(t, ctx, d.Complete(), "the download to complete")
	if !bytes.Equal(dst.bytes(0, size), data) {
		t.Errorf("downloaded bytes differ from the object")
	}
	if got := emu.MediaReads(bucketName, "obj"); got != 11 {
		t.Errorf("MediaReads = %d, want 11: the walk must skip chunks Ensure fetched", got)
	}
}

// TestDownloadEnsureSharesFetch: readers of a chunk in flight wait for that
// request instead of sending their own.
func TestDownloadEnsureSharesFetch(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	const size = 8 * testChunk
	data := testutil.Pattern(size, 22)
	gen := put(t, emu, "obj", data)
	ctx := testutil.Ctx(t, 60*time.Second)
	parked, release := parkFirstRead(emu)
	var released sync.Once
	defer released.Do(func() { close(release) })

	dst := newMemFile(size, 0)
	d := NewDownload(g, "obj", gen, size, dst, nil, DownloadOptions{ChunkSize: testChunk, Parallelism: 1})
	defer d.Stop()

	chunk3 := int64(3 * testChunk)
	errs := make(chan error, 1)
	go func() { errs <- d.Ensure(ctx, chunk3, 1) }()
	waitClosed(t, ctx, parked, "the first Ensure's request to reach the server")

	// More readers of the same chunk, each known to be waiting (it has
	// asked for its context's Done channel) before the request is let go.
	const readers = 5
	var wg sync.WaitGroup
	results := make(chan error, readers)
	for i := range readers {
		probe := &doneProbeCtx{Context: ctx, asked: make(chan struct{})}
		wg.Go(func() { results <- d.Ensure(probe, chunk3+int64(i*100), 50) })
		waitClosed(t, ctx, probe.asked, "a reader to wait for the chunk")
	}
	// A reader that gives up waits for nothing and sends nothing.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if err := d.Ensure(gone, chunk3, 10); err != context.Canceled {
		t.Errorf("Ensure with a cancelled context on a chunk in flight: err = %v, want context.Canceled", err)
	}
	if got := emu.MediaReads(bucketName, "obj"); got != 1 {
		t.Errorf("while the chunk was in flight the server saw %d reads, want 1", got)
	}

	released.Do(func() { close(release) })
	wg.Wait()
	close(results)
	for err := range results {
		if err != nil {
			t.Errorf("Ensure of a shared chunk: %v", err)
		}
	}
	if err := <-errs; err != nil {
		t.Errorf("first Ensure: %v", err)
	}
	if got := emu.MediaReads(bucketName, "obj"); got != 1 {
		t.Errorf("MediaReads = %d after %d concurrent Ensure calls of one chunk, want 1", got, readers+2)
	}
	if !bytes.Equal(dst.bytes(chunk3, testChunk), data[chunk3:chunk3+testChunk]) {
		t.Errorf("chunk 3 holds the wrong bytes")
	}
	// A present chunk needs no request.
	if err := d.Ensure(ctx, chunk3, testChunk); err != nil || emu.MediaReads(bucketName, "obj") != 1 {
		t.Errorf("Ensure of a present chunk: err = %v, media reads %d; want nil and no new request", err, emu.MediaReads(bucketName, "obj"))
	}
	// Out of range asks for nothing.
	for _, r := range [][2]int64{{size, 10}, {size + 100, 1}, {0, 0}, {10, -1}} {
		if err := d.Ensure(ctx, r[0], r[1]); err != nil {
			t.Errorf("Ensure(%d, %d) = %v, want nil", r[0], r[1], err)
		}
	}
	if got := emu.MediaReads(bucketName, "obj"); got != 1 {
		t.Errorf("empty or out-of-range Ensure calls made requests: MediaReads = %d, want 1", got)
	}
}

// TestDownloadPresentSkips: chunks the destination already holds are
// neither fetched nor overwritten.
func TestDownloadPresentSkips(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	const size = 10*testChunk + 1000
	const chunks = 11
	data := testutil.Pattern(size, 23)
	gen := put(t, emu, "obj", data)
	rec := &rangeRecorder{}
	emu.SetHook(rec.hook)
	ctx := testutil.Ctx(t, 60*time.Second)

	const marker = 0xEE
	present := make([]bool, chunks)
	for i := range present {
		present[i] = i%3 == 0 // 0, 3, 6, 9
	}
	dst := newMemFile(size, marker)
	d := NewDownload(g, "obj", gen, size, dst, present, DownloadOptions{ChunkSize: testChunk, Parallelism: 2})
	defer d.Stop()
	if got := d.Present(); !slices.Equal(got, present) {
		t.Errorf("Present before Start = %v, want %v", got, present)
	}
	d.Start()
	waitClosed(t, ctx, d.Complete(), "the download to complete")
	waitClosed(t, ctx, d.Idle(), "the walk to end")

	want := chunkStarts(chunks, func(i int) bool { return !present[i] })
	if got := rec.sorted(); !slices.Equal(got, want) {
		t.Errorf("range reads started at %v, want only the absent chunks %v", got, want)
	}
	if got := emu.MediaReads(bucketName, "obj"); got != int64(len(want)) {
		t.Errorf("MediaReads = %d, want %d", got, len(want))
	}
	for i := range chunks {
		off := int64(i) * testChunk
		n := min(testChunk, size-off)
		got := dst.bytes(off, n)
		if present[i] {
			if !bytes.Equal(got, bytes.Repeat([]byte{marker}, int(n))) {
				t.Errorf("chunk %d was present but was overwritten", i)
			}
		} else if !bytes.Equal(got, data[off:off+n]) {
			t.Errorf("chunk %d holds the wrong bytes", i)
		}
	}

	// Everything present: complete at once, no requests.
	emu.ResetCounters()
	all := slices.Repeat([]bool{true}, chunks)
	d2 := NewDownload(g, "obj", gen, size, dst, all, DownloadOptions{ChunkSize: testChunk, Parallelism: 2})
	defer d2.Stop()
	select {
	case <-d2.Complete():
	default:
		t.Error("a download with every chunk present is not complete")
	}
	d2.Start()
	waitClosed(t, ctx, d2.Idle(), "the walk of a complete download to end")
	if err := d2.Ensure(ctx, 0, size); err != nil {
		t.Errorf("Ensure on a complete download: %v", err)
	}
	if got := emu.TotalMediaReads(); got != 0 {
		t.Errorf("a download with every chunk present made %d media reads", got)
	}
}

// TestDownloadErrors: a version gone from the bucket is stale; other
// failures are not, and leave the chunk absent so a later Ensure retries.
func TestDownloadErrors(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T, emu *emulator.Server)
		stale    bool
		sentinel error
	}{
		{"overwritten", func(t *testing.T, emu *emulator.Server) {
			if _, err := emu.Put(bucketName, "obj", []byte("new version")); err != nil {
				t.Fatal(err)
			}
		}, true, ErrNotExist},
		{"deleted", func(t *testing.T, emu *emulator.Server) {
			if err := emu.Delete(bucketName, "obj"); err != nil {
				t.Fatal(err)
			}
		}, true, ErrNotExist},
		{"permission", func(t *testing.T, emu *emulator.Server) {
			emu.Fault(bucketName, http.StatusForbidden)
		}, false, ErrPermission},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			emu := startEmulator(t)
			g := newTestGCS(t, emu)
			const size = 3 * testChunk
			gen := put(t, emu, "obj", testutil.Pattern(size, 24))
			tt.setup(t, emu)
			ctx := testutil.Ctx(t, 60*time.Second)

			d := NewDownload(g, "obj", gen, size, newMemFile(size, 0), nil, DownloadOptions{ChunkSize: testChunk, Parallelism: 2})
			defer d.Stop()
			err := d.Ensure(ctx, testChunk, 10)
			if err == nil {
				t.Fatal("Ensure succeeded")
			}
			if IsStale(err) != tt.stale || !errors.Is(err, tt.sentinel) {
				t.Errorf("Ensure: err = %v, IsStale = %v; want IsStale %v and %v", err, IsStale(err), tt.stale, tt.sentinel)
			}
			d.Start()
			waitClosed(t, ctx, d.Idle(), "the walk to end")
			if err := d.Err(); IsStale(err) != tt.stale || !errors.Is(err, tt.sentinel) {
				t.Errorf("Err after the walk = %v, want IsStale %v and %v", err, tt.stale, tt.sentinel)
			}
			select {
			case <-d.Complete():
				t.Error("a failed download is complete")
			default:
			}
			if p := d.Present(); p[1] {
				t.Errorf("Present = %v: the failed chunk counts as present", p)
			}
		})
	}
}

// TestDownloadRetryAfterFailure: a chunk whose fetch failed is fetched
// again by the next Ensure.
func TestDownloadRetryAfterFailure(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	const size = 3 * testChunk
	data := testutil.Pattern(size, 25)
	gen := put(t, emu, "obj", data)
	ctx := testutil.Ctx(t, 60*time.Second)
	var failed atomic.Bool
	emu.SetHook(func(r *http.Request) (int, bool) {
		if isMediaRead(r) && failed.CompareAndSwap(false, true) {
			return http.StatusForbidden, true
		}
		return 0, false
	})
	dst := newMemFile(size, 0)
	d := NewDownload(g, "obj", gen, size, dst, nil, DownloadOptions{ChunkSize: testChunk, Parallelism: 1})
	defer d.Stop()
	if err := d.Ensure(ctx, 2*testChunk, 1); !errors.Is(err, ErrPermission) {
		t.Fatalf("first Ensure: err = %v, want ErrPermission", err)
	}
	if err := d.Ensure(ctx, 2*testChunk, 1); err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	if !bytes.Equal(dst.bytes(2*testChunk, testChunk), data[2*testChunk:]) {
		t.Error("chunk 2 holds the wrong bytes after the retry")
	}
	if got := emu.MediaReads(bucketName, "obj"); got != 2 {
		t.Errorf("MediaReads = %d, want 2 (the failure and the retry)", got)
	}
}

// TestDownloadShortObject: an object shorter than the size it was
// downloaded with fails instead of leaving a hole counted as present.
func TestDownloadShortObject(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	gen := put(t, emu, "obj", testutil.Pattern(testChunk+100, 26))
	ctx := testutil.Ctx(t, 60*time.Second)
	const claimed = 2 * testChunk
	d := NewDownload(g, "obj", gen, claimed, newMemFile(claimed, 0), nil, DownloadOptions{ChunkSize: testChunk, Parallelism: 1})
	defer d.Stop()
	// Bytes the object has may be served as they arrive; a byte past its
	// real end must fail.
	err := d.Ensure(ctx, testChunk+200, 1)
	if err == nil {
		t.Fatal("Ensure of bytes the object does not have succeeded")
	}
	if IsStale(err) {
		t.Errorf("a short object is reported stale: %v", err)
	}
	if p := d.Present(); p[1] {
		t.Error("the short chunk counts as present")
	}
}

// TestDownloadStop: Stop cancels requests held at the server and returns
// promptly; the walk ends with a cancellation error.
func TestDownloadStop(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	const size = 20 * testChunk
	gen := put(t, emu, "obj", testutil.Pattern(size, 27))
	ctx := testutil.Ctx(t, 60*time.Second)

	const par = 4
	var held atomic.Int64
	allHeld := make(chan struct{})
	emu.SetHook(func(r *http.Request) (int, bool) {
		if !isMediaRead(r) {
			return 0, false
		}
		if held.Add(1) == par {
			close(allHeld)
		}
		<-r.Context().Done() // held until the client goes away
		return http.StatusServiceUnavailable, true
	})
	d := NewDownload(g, "obj", gen, size, newMemFile(size, 0), nil, DownloadOptions{ChunkSize: testChunk, Parallelism: par})
	d.Start()
	waitClosed(t, ctx, allHeld, "every worker's request to be held at the server")

	// A reader waiting for a chunk the walk is fetching.
	waiter := make(chan error, 1)
	go func() { waiter <- d.Ensure(ctx, 0, 1) }()

	stopped := make(chan struct{})
	start := time.Now()
	go func() {
		d.Stop()
		d.Stop() // idempotent
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return within 10s with requests held at the server")
	}
	t.Logf("Stop took %v", time.Since(start))
	waitClosed(t, ctx, d.Idle(), "Idle after Stop")
	if err := d.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err after Stop = %v, want context.Canceled", err)
	}
	select {
	case err := <-waiter:
		if err == nil {
			t.Error("Ensure waiting on a cancelled fetch returned nil")
		}
	case <-ctx.Done():
		t.Fatal("Ensure did not return after Stop")
	}
	if p := d.Present(); slices.Contains(p, true) {
		t.Errorf("Present = %v after Stop with nothing fetched", p)
	}
	if got := emu.MediaReads(bucketName, "obj"); got != par {
		t.Errorf("MediaReads = %d, want %d (no request after Stop)", got, par)
	}
}
