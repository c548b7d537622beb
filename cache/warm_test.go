package cache

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestWarmPinsAndResumes: Warm fetches every object under its prefixes
// (a big one in several ranges) and checks them; a second Warm fetches
// nothing and says they were there; pinned copies are not evicted to
// make room for others, keep their pin across a reopen, and are evicted
// again once unpinned.
func TestWarmPinsAndResumes(t *testing.T) {
	e := newEnv(t)
	const size = 2 * chunk
	c := e.open(6 * size)
	data := map[string][]byte{}
	for i, name := range []string{"d/a", "d/b", "d/sub/c", "dx", "other/o1", "other/o2", "other/o3"} {
		data[name] = pattern(size, uint32(40+i))
		e.put(name, data[name])
	}

	r, err := c.Warm(e.ctx, []string{"d"}, WarmOptions{Parallelism: 8, Pin: true}, nil)
	if err != nil {
		t.Fatalf("Warm: %v", err)
	}
	if r.TotalFiles != 3 || r.Files != 3 || r.Failed != 0 || r.AlreadyFiles != 0 || r.TotalBytes != 3*size {
		t.Fatalf("first Warm = %+v, want 3 files (d/a, d/b, d/sub/c; not dx) fetched", r)
	}
	for _, name := range []string{"d/a", "d/b", "d/sub/c"} {
		if n := e.mediaReads(name); n != 2 {
			t.Errorf("%s: %d media reads, want 2 (one per chunk)", name, n)
		}
	}
	if n := e.mediaReads("dx"); n != 0 {
		t.Errorf("dx is not under d/ but was read %d times", n)
	}
	r, err = c.Warm(e.ctx, []string{"d"}, WarmOptions{Pin: true}, nil)
	if err != nil || r.AlreadyFiles != 3 || r.AlreadyBytes != 3*size || r.Failed != 0 {
		t.Fatalf("second Warm = %+v, %v; want all 3 already there", r, err)
	}
	if n := e.mediaReads("d/a"); n != 2 {
		t.Errorf("the second warm read d/a again (%d media reads)", n)
	}
	if s := c.Stats(); s.PinnedFiles != 3 || s.PinnedBytes != 3*size {
		t.Errorf("Stats: %d pinned files, %d bytes; want 3, %d", s.PinnedFiles, s.PinnedBytes, 3*size)
	}

	// The cache holds 6 objects; 3 are pinned. Reading 4 others evicts
	// others, never a pinned one.
	for _, name := range []string{"dx", "other/o1", "other/o2", "other/o3"} {
		a, _ := e.b.Stat(e.ctx, name)
		e.cacheAll(c, a, data[name])
	}
	names := entryNames(c)
	for _, name := range []string{"d/a", "d/b", "d/sub/c"} {
		if !slices.Contains(names, name) {
			t.Errorf("pinned %s was evicted; entries %v", name, names)
		}
	}
	if s := c.Stats(); s.UsedBytes > 6*size || s.Evictions == 0 {
		t.Errorf("Stats = %+v: want evictions, and at most %d bytes used", s, 6*size)
	}

	// The pins are in the records: they survive a reopen.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = e.open(6 * size)
	if s := c.Stats(); s.PinnedFiles != 3 {
		t.Fatalf("after reopening: %d pinned files, want 3", s.PinnedFiles)
	}
	if n, b := c.Unpin([]string{"d/sub", "d/a"}); n != 2 || b != 2*size {
		t.Errorf("Unpin(d/sub, d/a) = %d files, %d bytes; want 2, %d", n, b, 2*size)
	}
	if s := c.Stats(); s.PinnedFiles != 1 {
		t.Errorf("after Unpin: %d pinned files, want 1 (d/b)", s.PinnedFiles)
	}
	// Unpinned copies are evicted again: fill the cache with others.
	for i := range 6 {
		name := fmt.Sprintf("more/m%d", i)
		a := e.put(name, pattern(size, uint32(90+i)))
		e.cacheAll(c, a, pattern(size, uint32(90+i)))
	}
	names = entryNames(c)
	if slices.Contains(names, "d/a") || !slices.Contains(names, "d/b") {
		t.Errorf("after filling the cache: entries %v; want d/a evicted (unpinned), d/b kept (pinned)", names)
	}
}

// TestWarmRefusesWhatDoesNotFit: a set bigger than the cache beside its
// pinned copies fails before anything is fetched, saying how much is
// missing.
func TestWarmRefusesWhatDoesNotFit(t *testing.T) {
	e := newEnv(t)
	const size = 2 * chunk
	c := e.open(4 * size)
	for i := range 3 {
		e.put(fmt.Sprintf("p/%d", i), pattern(size, uint32(i)))
		e.put(fmt.Sprintf("q/%d", i), pattern(size, uint32(10+i)))
	}
	if _, err := c.Warm(e.ctx, []string{"p"}, WarmOptions{Pin: true}, nil); err != nil {
		t.Fatal(err)
	}
	before := e.emu.TotalMediaReads()
	_, err := c.Warm(e.ctx, []string{"q"}, WarmOptions{}, nil)
	var nr *NoRoomError
	if !errors.As(err, &nr) || !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Warm(q) = %v, want a NoRoomError", err)
	}
	if nr.Short != 2*size || nr.Kept != 3*size {
		t.Errorf("NoRoomError = %+v, want %d short and %d kept", nr, 2*size, 3*size)
	}
	if n := e.emu.TotalMediaReads() - before; n != 0 {
		t.Errorf("the refused warm read %d times", n)
	}
}

// TestWarmReportsFailures: an object that cannot be fetched is reported
// and the others are warmed.
func TestWarmReportsFailures(t *testing.T) {
	e := newEnv(t)
	c := e.open(1 << 20)
	for i := range 4 {
		e.put(fmt.Sprintf("f/%d", i), pattern(chunk, uint32(i)))
	}
	// f/2's bytes are gone from the bucket between the listing and the read.
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		if r.URL.Query().Get("alt") == "media" && strings.HasSuffix(r.URL.Path, "/o/f/2") {
			return http.StatusNotFound, true
		}
		return 0, false
	})
	r, err := c.Warm(e.ctx, []string{"f"}, WarmOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Files != 4 || r.Failed != 1 || len(r.Errors) != 1 || r.Errors[0].Object != "f/2" {
		t.Fatalf("Warm = %+v; want 4 files done, f/2 failed", r)
	}
	for _, name := range []string{"f/0", "f/1", "f/3"} {
		if !slices.Contains(entryNames(c), name) {
			t.Errorf("%s was not warmed", name)
		}
	}
}

// TestWarmPinsOnlyWhatItFilled: a pinned warm whose object cannot be
// fetched leaves no pin behind: a pinned partial copy would keep its
// full size from eviction (and count against every later warm) for a
// version nothing can read, until an unpin that nobody knows to run.
func TestWarmPinsOnlyWhatItFilled(t *testing.T) {
	e := newEnv(t)
	const size = 2 * chunk
	c := e.open(4 * size)
	for i := range 3 {
		e.put(fmt.Sprintf("f/%d", i), pattern(size, uint32(i)))
	}
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		if r.URL.Query().Get("alt") == "media" && strings.HasSuffix(r.URL.Path, "/o/f/2") {
			return http.StatusNotFound, true
		}
		return 0, false
	})
	r, err := c.Warm(e.ctx, []string{"f"}, WarmOptions{Pin: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Failed != 1 || len(r.Errors) != 1 || r.Errors[0].Object != "f/2" {
		t.Fatalf("Warm = %+v; want f/2 failed", r)
	}
	if s := c.Stats(); s.PinnedFiles != 2 || s.PinnedBytes != 2*size {
		t.Errorf("Stats: %d pinned files (%d bytes), want 2 (%d): the failed f/2 must not be pinned", s.PinnedFiles, s.PinnedBytes, 2*size)
	}
	e.emu.SetHook(nil)
	// Its room is not kept from others: two more objects fit beside the
	// two pinned ones.
	for i := range 2 {
		e.put(fmt.Sprintf("g/%d", i), pattern(size, uint32(10+i)))
	}
	if _, err := c.Warm(e.ctx, []string{"g"}, WarmOptions{Pin: true}, nil); err != nil {
		t.Errorf("Warm(g) beside 2 pinned copies in a cache of 4: %v", err)
	}
}

// TestPinnedOverCapWarns: a cache opened with a size below what its
// pinned copies hold keeps them (pins are never evicted) and says so at
// the start: nothing else fits in it until they are unpinned.
func TestPinnedOverCapWarns(t *testing.T) {
	e := newEnv(t)
	const size = 2 * chunk
	c := e.open(4 * size)
	for i := range 3 {
		e.put(fmt.Sprintf("p/%d", i), pattern(size, uint32(i)))
	}
	if _, err := c.Warm(e.ctx, []string{"p"}, WarmOptions{Pin: true}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var log logBuffer
	o := e.opts(2 * size)
	o.Logger = slog.New(slog.NewTextHandler(&log, nil))
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if s := c.Stats(); s.PinnedFiles != 3 {
		t.Errorf("after reopening smaller: %d pinned files, want 3 (never evicted)", s.PinnedFiles)
	}
	if !strings.Contains(log.String(), "pinned copies keep the cache over its size") {
		t.Errorf("no warning at the start of a cache smaller than its pins; log:\n%s", log.String())
	}
}

// Warm fetches a medium object as a reader would (issue 37): one chunk in
// sub-ranges of MinRange at once, the copy checked and complete.
func TestWarmSplitsAMediumObject(t *testing.T) {
	e := newEnv(t)
	c := e.openSplitting(1 << 20)
	data := pattern(chunk, 77)
	a := e.put("w/m", data)
	r, err := c.Warm(e.ctx, []string{"w"}, WarmOptions{Parallelism: 8}, nil)
	if err != nil || r.Files != 1 || r.Failed != 0 {
		t.Fatalf("Warm = %+v, %v; want 1 file fetched", r, err)
	}
	if n := e.mediaReads("w/m"); n != 4 {
		t.Errorf("%d media reads for one chunk with MinRange a quarter of it; want 4", n)
	}
	h := e.openHandle(c, a)
	if !h.Complete() {
		t.Fatal("the copy is not complete after the warm")
	}
	e.mustReadAll(h, data)
	h.Close()
}
