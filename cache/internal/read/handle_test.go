package read

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// fakeBucket holds one live version per name and logs its range reads.
type fakeBucket struct {
	mu    sync.Mutex
	objs  map[Version][]byte
	reads []string // "name#gen off+length"
}

func (b *fakeBucket) ReadRange(ctx context.Context, name string, gen, off, length int64, w io.Writer) (int64, error) {
	b.mu.Lock()
	b.reads = append(b.reads, fmt.Sprintf("%s#%d %d+%d", name, gen, off, length))
	data, ok := b.objs[Version{name, gen}]
	b.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("reading %s#%d: %w", name, gen, transfer.ErrNotExist)
	}
	if off >= int64(len(data)) {
		return 0, nil
	}
	n, err := w.Write(data[off:min(off+length, int64(len(data)))])
	return int64(n), err
}

func (b *fakeBucket) log() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.reads...)
}

// fakeCache answers CheckRange from bad (chunks that fail) and from, and
// counts the rest.
type fakeCache struct {
	chunk   int64
	bad     map[int64]bool // chunk indexes that fail their check
	from    Version        // where the bytes of a bad chunk are read instead
	damaged error          // answered instead, if set
	f       *os.File       // the file the handle reads, to see it closed

	mu              sync.Mutex
	checks          int
	released        int
	closedAtRelease bool
	read, fetched   int64
}

func (c *fakeCache) CheckRange(f *os.File, off, n int64) (bool, Version, error) {
	c.mu.Lock()
	c.checks++
	c.mu.Unlock()
	for i := off / c.chunk; i <= (off+n-1)/c.chunk; i++ {
		if c.bad[i] {
			return false, c.from, c.damaged
		}
	}
	return true, Version{}, nil
}

func (c *fakeCache) Promote(dl *transfer.Download) { panic("no download here") }

func (c *fakeCache) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released++
	_, err := c.f.Stat()
	c.closedAtRelease = errors.Is(err, os.ErrClosed)
}

func (c *fakeCache) CountRead(n int64) {
	c.mu.Lock()
	c.read += n
	c.mu.Unlock()
}

func (c *fakeCache) CountFetched(why transfer.FetchReason, n int64) {
	if why != transfer.FetchRead {
		panic("a handle fetches for its reads only")
	}
	c.mu.Lock()
	c.fetched += n
	c.mu.Unlock()
}

func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7) + seed
	}
	return p
}

// An object read directly: Check fetches its head, a read within it sends
// nothing, a read across its end fetches only the rest; what Check and
// the reads fetched counts, once.
func TestDirectReadFromHeadThenBucket(t *testing.T) {
	ctx := context.Background()
	data := pattern(HeadSize+100<<10, 1)
	b := &fakeBucket{objs: map[Version][]byte{{"big", 5}: data}}
	c := &fakeCache{chunk: 64 << 10}
	h := New(Params{Cache: c, Bucket: b, Name: "big", Generation: 5, Size: int64(len(data)), ChunkSize: c.chunk})
	defer h.Close()
	if err := h.Check(ctx); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 4096)
	if n, err := h.ReadAt(ctx, p, 1000); err != nil || n != len(p) || !bytes.Equal(p, data[1000:1000+len(p)]) {
		t.Fatalf("ReadAt in the head = %d, %v", n, err)
	}
	off := int64(HeadSize - 1000)
	if n, err := h.ReadAt(ctx, p, off); err != nil || n != len(p) || !bytes.Equal(p, data[off:off+int64(len(p))]) {
		t.Fatalf("ReadAt across the head's end = %d, %v", n, err)
	}
	want := []string{fmt.Sprintf("big#5 0+%d", HeadSize), fmt.Sprintf("big#5 %d+%d", HeadSize, len(p)-1000)}
	if got := b.log(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("range reads %q; want %q", got, want)
	}
	if c.fetched != HeadSize+int64(len(p)-1000) || c.read != 0 {
		t.Fatalf("counted %d fetched, %d read; want %d fetched", c.fetched, c.read, HeadSize+len(p)-1000)
	}
	last := int64(len(data)) - 10
	if n, err := h.ReadAt(ctx, p, last); err != nil || n != 10 {
		t.Fatalf("ReadAt at the end = %d, %v; want 10, nil", n, err)
	}
	if n, err := h.ReadAt(ctx, p, int64(len(data))); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt past the end = %d, %v; want EOF", n, err)
	}
	if _, ok := h.PassthroughFd(); ok {
		t.Error("a direct handle offers a descriptor")
	}
	h.Close()
	if c.released != 0 {
		t.Error("a direct handle released a copy it does not hold")
	}
}

// copyHandle makes a handle of a complete local copy of size bytes whose
// file holds local, being verified (verify) or not.
func copyHandle(t *testing.T, c *fakeCache, b *fakeBucket, local []byte, verify bool) *Handle {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, local, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	c.f = f
	return New(Params{Cache: c, Bucket: b, File: f, Name: "obj", Generation: 3, Size: int64(len(local)),
		ChunkSize: c.chunk, Complete: true, Verify: verify})
}

// A copy being verified: a read of good chunks is served from the file, a
// read touching a bad one from the bucket (the handle's version, or a
// pending copy's source), a held file answers the cache's error.
func TestCheckedReadOfBadChunkFromBucket(t *testing.T) {
	ctx := context.Background()
	const chunk = 4096
	data := pattern(4*chunk, 2)
	local := bytes.Clone(data)
	local[2*chunk+5] ^= 0xff // chunk 2 is bad on disk
	b := &fakeBucket{objs: map[Version][]byte{{"obj", 3}: data, {"src", 9}: data}}
	c := &fakeCache{chunk: chunk, bad: map[int64]bool{2: true}}
	h := copyHandle(t, c, b, local, true)
	if _, ok := h.PassthroughFd(); ok {
		t.Error("a copy being verified is offered to the kernel")
	}
	p := make([]byte, 100)
	if n, err := h.ReadAt(ctx, p, chunk+10); err != nil || n != len(p) || !bytes.Equal(p, data[chunk+10:chunk+10+len(p)]) {
		t.Fatalf("ReadAt of a good chunk = %d, %v", n, err)
	}
	if len(b.log()) != 0 || c.read != int64(len(p)) {
		t.Fatalf("a good chunk: range reads %q, %d bytes counted read", b.log(), c.read)
	}
	p = make([]byte, 2*chunk)
	off := int64(chunk + 100) // chunks 1 to 3
	if n, err := h.ReadAt(ctx, p, off); err != nil || n != len(p) || !bytes.Equal(p, data[off:off+int64(len(p))]) {
		t.Fatalf("ReadAt touching the bad chunk = %d, %v", n, err)
	}
	if got, want := fmt.Sprint(b.log()), fmt.Sprint([]string{fmt.Sprintf("obj#3 %d+%d", off, len(p))}); got != want {
		t.Fatalf("range reads %s; want %s", got, want)
	}
	if c.fetched != int64(len(p)) || c.read != 100 {
		t.Fatalf("counted %d fetched, %d read; want %d, 100", c.fetched, c.read, len(p))
	}
	// Near the end, the read is cut to the size.
	c.from = Version{"src", 9}
	if n, err := h.ReadAt(ctx, p, 3*chunk-10); err != nil || n != chunk+10 || !bytes.Equal(p[:n], data[3*chunk-10:]) {
		t.Fatalf("ReadAt of the bad chunk to the end = %d, %v", n, err)
	}
	if log := b.log(); log[len(log)-1] != fmt.Sprintf("src#9 %d+%d", 3*chunk-10, chunk+10) {
		t.Fatalf("a pending copy's bad chunk read from %s; want its source", log[len(log)-1])
	}
	held := errors.New("held")
	c.damaged = held
	if n, err := h.ReadAt(ctx, p, 2*chunk); n != 0 || !errors.Is(err, held) {
		t.Fatalf("ReadAt of a held file = %d, %v; want the cache's error", n, err)
	}
	if n, err := h.ReadAt(ctx, p, 4*chunk); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt at the end = %d, %v; want EOF", n, err)
	}
	h.Close()
	h.Close()
	if c.released != 1 || !c.closedAtRelease {
		t.Fatalf("released %d times (file closed first: %v); want once, after the file", c.released, c.closedAtRelease)
	}
}

// A complete copy not being verified is read as is, never checked, and
// offered to the kernel; the file says where it ends.
func TestCompleteCopyReadAsIs(t *testing.T) {
	ctx := context.Background()
	data := pattern(10000, 3)
	b := &fakeBucket{}
	c := &fakeCache{chunk: 4096, bad: map[int64]bool{0: true}}
	h := copyHandle(t, c, b, data, false)
	defer h.Close()
	if _, ok := h.PassthroughFd(); !ok {
		t.Error("a complete, checked copy is not offered to the kernel")
	}
	p := make([]byte, 4096)
	if n, err := h.ReadAt(ctx, p, 8000); err != nil || n != 2000 || !bytes.Equal(p[:n], data[8000:]) {
		t.Fatalf("ReadAt to the end = %d, %v; want 2000, nil", n, err)
	}
	if c.checks != 0 || len(b.log()) != 0 || c.read != 2000 {
		t.Fatalf("%d checks, range reads %q, %d read", c.checks, b.log(), c.read)
	}
	if n := testing.AllocsPerRun(100, func() { h.ReadAt(ctx, p, 100) }); n != 0 {
		t.Errorf("a read of a complete copy allocates %v times; want none", n)
	}
}

// A version gone from the bucket is ErrStale: at the check of a direct
// handle, at its reads, and at the read of a bad chunk of a copy; other
// errors are not.
func TestStaleVersion(t *testing.T) {
	ctx := context.Background()
	b := &fakeBucket{objs: map[Version][]byte{{"obj", 4}: pattern(1000, 4)}}
	c := &fakeCache{chunk: 4096}
	h := New(Params{Cache: c, Bucket: b, Name: "obj", Generation: 3, Size: 1000, ChunkSize: c.chunk})
	defer h.Close()
	if err := h.Check(ctx); !errors.Is(err, ErrStale) {
		t.Fatalf("Check of a gone version = %v; want ErrStale", err)
	}
	p := make([]byte, 10)
	if _, err := h.ReadAt(ctx, p, 0); !errors.Is(err, ErrStale) {
		t.Fatalf("ReadAt of a gone version = %v; want ErrStale", err)
	}
	cc := &fakeCache{chunk: 4096, bad: map[int64]bool{0: true}}
	hc := copyHandle(t, cc, b, pattern(1000, 3), true)
	defer hc.Close()
	if _, err := hc.ReadAt(ctx, p, 0); !errors.Is(err, ErrStale) {
		t.Fatalf("ReadAt of a bad chunk of a gone version = %v; want ErrStale", err)
	}
	if err := StaleOr(io.ErrUnexpectedEOF); errors.Is(err, ErrStale) {
		t.Fatal("StaleOr marked an error that is not the version's")
	}
}

// blockingBucket holds every range read of blocked until release closes.
// It is a transfer.Bucket for transfer.Limited, which calls ReadRange
// alone here (the other methods are the nil interface's: they panic).
type blockingBucket struct {
	transfer.Bucket
	fb      *fakeBucket
	blocked string
	started chan struct{} // one per blocked read begun
	release chan struct{}
}

func (b *blockingBucket) ReadRange(ctx context.Context, name string, gen, off, length int64, w io.Writer) (int64, error) {
	if name == b.blocked {
		b.started <- struct{}{}
		select {
		case <-b.release:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return b.fb.ReadRange(ctx, name, gen, off, length, w)
}

// The head an open of an object read directly fetches is a reader's
// request: with every shared slot of the bucket's limit held by
// background fetches, it goes out on a slot kept for readers.
func TestHeadIsAForegroundRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data := pattern(HeadSize, 2)
	fb := &fakeBucket{objs: map[Version][]byte{{"big", 5}: data, {"busy", 1}: data}}
	bb := &blockingBucket{fb: fb, blocked: "busy", started: make(chan struct{}, 4), release: make(chan struct{})}
	var busy sync.WaitGroup
	defer busy.Wait()
	defer close(bb.release)
	lim := transfer.NewLimited(bb, 4) // 4 shared slots, 1 kept for readers
	for range 4 {
		busy.Go(func() { lim.ReadRange(ctx, "busy", 1, 0, 10, io.Discard) }) // background: not Foreground
	}
	for range 4 {
		<-bb.started
	}
	c := &fakeCache{chunk: 64 << 10}
	h := New(Params{Cache: c, Bucket: lim, Name: "big", Generation: 5, Size: int64(len(data)), ChunkSize: c.chunk})
	defer h.Close()
	if err := h.Check(ctx); err != nil {
		t.Fatalf("Check with every shared slot held: %v", err)
	}
}
