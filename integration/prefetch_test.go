package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// putTree stores dirs x files objects of size bytes named dNN/fNNNN and
// returns their contents by name.
func putTree(t testing.TB, emu *emulator.Server, dirs, files, size int) map[string][]byte {
	t.Helper()
	tree := map[string][]byte{}
	for d := range dirs {
		for f := range files {
			name := fmt.Sprintf("d%02d/f%04d", d, f)
			tree[name] = testutil.RandomBytes(size, uint64(d*10000+f))
			put(t, emu, name, tree[name])
		}
	}
	return tree
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// listDir lists a directory of the mount, so that its files' attributes
// come from the listing.
func listDir(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.ReadDir(dir); err != nil {
		t.Fatal(err)
	}
}

// A cold small file whose attributes came from a listing opens and reads
// with one request.
func TestColdSmallFileOneRequest(t *testing.T) {
	emu := startEmulator(t, nil)
	tree := putTree(t, emu, 1, 3, 16<<10)
	m := mount(t, emu, mountOpts{args: []string{"--prefetch=false"}})
	listDir(t, m.path("d00"))
	for _, name := range []string{"d00/f0000", "d00/f0001"} {
		emu.ResetCounters()
		if got := readFile(t, m.path(name)); !bytes.Equal(got, tree[name]) {
			t.Fatalf("%s: wrong bytes", name)
		}
		if n := emu.Requests(); n != 1 {
			t.Fatalf("cold open and read of %s sent %d requests; want 1", name, n)
		}
	}
}

// Files of a directory read one after another: the next ones are in the
// cache before they are opened, fetched once each, and counted as used.
func TestPrefetchNextFilesOfDirectory(t *testing.T) {
	emu := startEmulator(t, nil)
	const files = 20
	tree := putTree(t, emu, 1, files, 16<<10)
	m := mount(t, emu, mountOpts{})
	listDir(t, m.path("d00"))
	emu.ResetCounters()
	for _, name := range []string{"d00/f0000", "d00/f0001"} {
		if got := readFile(t, m.path(name)); !bytes.Equal(got, tree[name]) {
			t.Fatalf("%s: wrong bytes", name)
		}
	}
	waitUntil(t, "the rest of the directory to be prefetched", time.Minute, func() bool {
		return emu.TotalMediaReads() >= files
	})
	emu.ResetCounters()
	for f := 2; f < files; f++ {
		name := fmt.Sprintf("d00/f%04d", f)
		if got := readFile(t, m.path(name)); !bytes.Equal(got, tree[name]) {
			t.Fatalf("%s: wrong bytes", name)
		}
	}
	if n := emu.Requests(); n != 0 {
		t.Fatalf("reading the prefetched files sent %d requests; want 0", n)
	}
	st := m.status(t)
	// f0001 may have been prefetched too (after the open of the first
	// file) or opened first.
	if least := int64((files - 2) * 16 << 10); st.PrefetchUsedBytes < least || st.PrefetchWastedBytes != 0 {
		t.Fatalf("prefetch used/wasted = %d/%d bytes; want at least %d/0", st.PrefetchUsedBytes, st.PrefetchWastedBytes, least)
	}
}

// The bounds: files over --prefetch-max-size are never fetched ahead, and
// --prefetch-files bounds how far ahead the prefetch goes.
func TestPrefetchBounds(t *testing.T) {
	emu := startEmulator(t, nil)
	tree := map[string][]byte{}
	for f := range 12 {
		size := 4 << 10
		if f%2 == 1 {
			size = 32 << 10 // over the limit below
		}
		name := fmt.Sprintf("d/f%02d", f)
		tree[name] = testutil.RandomBytes(size, uint64(f))
		put(t, emu, name, tree[name])
	}
	m := mount(t, emu, mountOpts{args: []string{"--prefetch-max-size", "16KiB", "--prefetch-files", "6"}})
	listDir(t, m.path("d"))
	emu.ResetCounters()
	readFile(t, m.path("d/f00"))
	readFile(t, m.path("d/f01"))
	// Six files after f01: f02..f07, of which the small ones.
	waitUntil(t, "the small files ahead to be prefetched", time.Minute, func() bool {
		return emu.MediaReads(testBucket, "d/f02") > 0 && emu.MediaReads(testBucket, "d/f04") > 0 && emu.MediaReads(testBucket, "d/f06") > 0
	})
	for _, name := range []string{"d/f03", "d/f05", "d/f07", "d/f08", "d/f09", "d/f10"} {
		if n := emu.MediaReads(testBucket, name); n != 0 {
			t.Errorf("%s was fetched %d times before any open; want 0 (too big, or past the window)", name, n)
		}
	}
}

// --prefetch=false: reading in order fetches nothing ahead.
func TestPrefetchOff(t *testing.T) {
	emu := startEmulator(t, nil)
	tree := putTree(t, emu, 1, 6, 4<<10)
	m := mount(t, emu, mountOpts{args: []string{"--prefetch=false"}})
	listDir(t, m.path("d00"))
	emu.ResetCounters()
	for f := range 5 {
		name := fmt.Sprintf("d00/f%04d", f)
		if got := readFile(t, m.path(name)); !bytes.Equal(got, tree[name]) {
			t.Fatalf("%s: wrong bytes", name)
		}
	}
	// Every read waited for its own fetch; a prefetch would have asked
	// for f0005 by now (it is queued before the open of f0001 fetches).
	if n := emu.MediaReads(testBucket, "d00/f0005"); n != 0 {
		t.Fatalf("d00/f0005 was fetched %d times with --prefetch=false; want 0", n)
	}
}

// An open against the listing order (the pattern stopped) drops what the
// directory had queued: only the fetches already running finish.
func TestPrefetchCancelledWhenPatternStops(t *testing.T) {
	emu := startEmulator(t, nil)
	d := putTree(t, emu, 1, 80, 4<<10) // d00/f0000 .. d00/f0079
	for f := range 4 {
		put(t, emu, fmt.Sprintf("e/f%d", f), []byte("e"))
	}
	// Hold the fetches of f0002 and f0003 (the first two prefetched
	// after f0001) until the pattern has stopped.
	release := make(chan struct{})
	var held atomic.Int64
	emu.SetHook(func(r *http.Request) (int, bool) {
		if r.Method == http.MethodGet && (strings.HasSuffix(r.URL.Path, "d00/f0002") || strings.HasSuffix(r.URL.Path, "d00/f0003")) {
			held.Add(1)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		return 0, false
	})
	defer emu.SetHook(nil)
	// --max-requests 4: two prefetches in flight at most.
	m := mount(t, emu, mountOpts{args: []string{"--max-requests", "4", "--prefetch-files", "64"}})
	listDir(t, m.path("d00"))
	listDir(t, m.path("e"))
	readFile(t, m.path("d00/f0000"))
	readFile(t, m.path("d00/f0001")) // in order: up to 64 files queued
	waitUntil(t, "the two prefetches to be held", time.Minute, func() bool { return held.Load() == 2 })
	if got := readFile(t, m.path("d00/f0000")); !bytes.Equal(got, d["d00/f0000"]) { // back: the pattern stops
		t.Fatal("d00/f0000: wrong bytes")
	}
	close(release)
	// A new pattern in e: its prefetches queue behind whatever d00 still
	// had queued, so once e/f2 is fetched, d00's queue is past.
	readFile(t, m.path("e/f0"))
	readFile(t, m.path("e/f1"))
	waitUntil(t, "e/f2 to be prefetched", time.Minute, func() bool { return emu.MediaReads(testBucket, "e/f2") > 0 })
	for f := 4; f < 80; f++ {
		name := fmt.Sprintf("d00/f%04d", f)
		if n := emu.MediaReads(testBucket, name); n != 0 {
			t.Errorf("%s was fetched %d times after the pattern stopped; want 0", name, n)
		}
	}
}
