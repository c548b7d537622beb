package cache

import (
	"bytes"
	"errors"
	"testing"

	"github.com/bucketfs/bucketfs/cache/internal/fetch"
	"github.com/bucketfs/bucketfs/cache/internal/read"
)

// A prefetched copy is complete and checked, an open of it sends no
// request, and the bytes count as used.
func TestPrefetchFillsAndCountsUse(t *testing.T) {
	e := newEnv(t)
	c := e.open(1 << 20)
	data := bytes.Repeat([]byte("p"), 16<<10)
	a := e.put("d/f1", data)
	fetched, err := c.Prefetch(e.ctx, a)
	if err != nil || !fetched {
		t.Fatalf("Prefetch = %v, %v; want true, nil", fetched, err)
	}
	if again, err := c.Prefetch(e.ctx, a); again || err != nil {
		t.Fatalf("second Prefetch = %v, %v; want false, nil (already cached)", again, err)
	}
	e.emu.ResetCounters()
	h := e.openHandle(c, a)
	if !h.Complete() {
		t.Fatal("the open after a prefetch found the copy incomplete")
	}
	e.mustReadAll(h, data)
	h.Close()
	if n := e.emu.Requests(); n != 0 {
		t.Fatalf("open and read after prefetch sent %d requests; want 0", n)
	}
	if s := c.Stats(); s.PrefetchUsedBytes != int64(len(data)) || s.PrefetchWastedBytes != 0 {
		t.Fatalf("prefetch used/wasted = %d/%d; want %d/0", s.PrefetchUsedBytes, s.PrefetchWastedBytes, len(data))
	}
}

// A prefetch takes only free room: a full cache evicts nothing for it.
func TestPrefetchNeverEvicts(t *testing.T) {
	e := newEnv(t)
	c := e.open(40 << 10)
	data := bytes.Repeat([]byte("q"), 16<<10)
	a1, a2, a3 := e.put("d/f1", data), e.put("d/f2", data), e.put("d/f3", data)
	e.cacheAll(c, a1, data)
	e.cacheAll(c, a2, data)
	fetched, err := c.Prefetch(e.ctx, a3)
	if err != nil || fetched {
		t.Fatalf("Prefetch into a full cache = %v, %v; want false, nil", fetched, err)
	}
	s := c.Stats()
	if s.Evictions != 0 || s.Entries != 2 || e.mediaReads("d/f3") != 0 {
		t.Fatalf("after a prefetch into a full cache: evictions=%d entries=%d reads of f3=%d; want 0, 2, 0",
			s.Evictions, s.Entries, e.mediaReads("d/f3"))
	}
}

// A prefetched copy evicted before any open counts as wasted.
func TestPrefetchWasteCounted(t *testing.T) {
	e := newEnv(t)
	c := e.open(40 << 10)
	data := bytes.Repeat([]byte("w"), 16<<10)
	a1, a2, a3 := e.put("d/f1", data), e.put("d/f2", data), e.put("d/f3", data)
	if ok, err := c.Prefetch(e.ctx, a1); !ok || err != nil {
		t.Fatalf("Prefetch = %v, %v", ok, err)
	}
	e.cacheAll(c, a2, data)
	e.cacheAll(c, a3, data) // evicts the least recently used: the prefetched f1
	if s := c.Stats(); s.PrefetchWastedBytes != int64(len(data)) || s.PrefetchUsedBytes != 0 {
		t.Fatalf("prefetch used/wasted = %d/%d; want 0/%d", s.PrefetchUsedBytes, s.PrefetchWastedBytes, len(data))
	}
}

// A version gone from the bucket: the prefetch says ErrStale and leaves
// nothing counted as fetched.
func TestPrefetchStale(t *testing.T) {
	e := newEnv(t)
	c := e.open(1 << 20)
	a := e.put("d/f1", []byte("old"))
	e.put("d/f1", []byte("new"))
	fetched, err := c.Prefetch(e.ctx, a)
	if fetched || !errors.Is(err, ErrStale) {
		t.Fatalf("Prefetch of a replaced version = %v, %v; want false, ErrStale", fetched, err)
	}
	if s := c.Stats(); s.Entries != 0 {
		t.Fatalf("a prefetch of a version gone from the bucket left %d entries; want 0", s.Entries)
	}
}

// An object too big for the cache opens and reads its first bytes with
// one request: the open's check fetches them.
func TestUncachedOpenAndFirstReadOneRequest(t *testing.T) {
	e := newEnv(t)
	c := e.open(64 << 10)
	data := make([]byte, 512<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	a := e.put("big", data)
	e.emu.ResetCounters()
	h := e.openHandle(c, a)
	defer h.Close()
	if err := h.Check(e.ctx); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 128<<10)
	if n, err := h.ReadAt(e.ctx, p, 4096); err != nil || n != len(p) || !bytes.Equal(p, data[4096:4096+len(p)]) {
		t.Fatalf("ReadAt = %d, %v, equal=%v", n, err, bytes.Equal(p[:n], data[4096:4096+n]))
	}
	if n := e.emu.Requests(); n != 1 {
		t.Fatalf("open, check and first read of an uncached object sent %d requests; want 1", n)
	}
	// Across the end of the head: the rest comes from the bucket.
	if n, err := h.ReadAt(e.ctx, p, read.HeadSize-1000); err != nil || n != len(p) || !bytes.Equal(p, data[read.HeadSize-1000:read.HeadSize-1000+len(p)]) {
		t.Fatalf("ReadAt across the head = %d, %v", n, err)
	}
}

// A prefetch's acquire that finds an older copy of the name (made by an
// open since the prefetch looked) and no free room for the new version
// removes the old copy it dropped: it used to keep its record, its file
// and its bytes in the count until the next start, the cache then
// evicting others for room it did not lack.
func TestPrefetchNoRoomRemovesDroppedCopy(t *testing.T) {
	e := newEnv(t)
	c := e.open(24 << 10)
	old := bytes.Repeat([]byte("o"), 16<<10)
	a1 := e.put("d/f", old)
	e.cacheAll(c, a1, old)
	h := e.openHandle(c, a1)
	file := dataFile(c, h)
	h.Close()
	a2 := e.put("d/f", bytes.Repeat([]byte("n"), 16<<10))
	ctx := fetch.ForPrefetch(e.ctx)
	if _, _, err := c.acquireCreated(ctx, a2, false); !errors.Is(err, fetch.ErrNoRoom) {
		t.Fatalf("prefetch acquire of the new version beside the old = %v, want fetch.ErrNoRoom", err)
	}
	if s := c.Stats(); s.Entries != 0 || s.UsedBytes != 0 {
		t.Errorf("after the old copy was dropped: %d entries, %d bytes used; want 0, 0", s.Entries, s.UsedBytes)
	}
	if exists(file) {
		t.Errorf("the dropped copy's file %s is still there", file)
	}
}

// A file fetched ahead (the directory prefetch, warm) comes as a reader's
// would: an object of fewer chunks than the parallelism in sub-ranges of
// MinRange (issue 37), checked whole, and then served with no request.
func TestPrefetchSplitsAMediumObject(t *testing.T) {
	e := newEnv(t)
	c := e.openSplitting(1 << 20)
	data := bytes.Repeat([]byte("m"), chunk)
	a := e.put("d/m", data)
	if fetched, err := c.Prefetch(e.ctx, a); err != nil || !fetched {
		t.Fatalf("Prefetch = %v, %v; want true, nil", fetched, err)
	}
	if n := e.mediaReads("d/m"); n != 4 {
		t.Errorf("%d media reads for one chunk with MinRange a quarter of it; want 4", n)
	}
	e.emu.ResetCounters()
	h := e.openHandle(c, a)
	if !h.Complete() {
		t.Fatal("the open after a prefetch found the copy incomplete")
	}
	e.mustReadAll(h, data)
	h.Close()
	if n := e.emu.Requests(); n != 0 {
		t.Fatalf("open and read after prefetch sent %d requests; want 0", n)
	}
}

// openSplitting opens a cache whose downloads fetch a chunk in four
// sub-ranges at once (MinRange a quarter of a chunk, Parallelism 16).
func (e *env) openSplitting(maxSize int64) *Cache {
	e.t.Helper()
	o := e.opts(maxSize)
	o.Parallelism, o.MinRange = 16, chunk/4
	c, err := Open(o, e.b)
	if err != nil {
		e.t.Fatalf("cache.Open: %v", err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}
