package integration

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil/testemu"
)

// TestBigListingInRanges: a directory of more names than a page holds
// is listed in name ranges at once (transfer.ListAll, issue 35); every
// name shows once, whichever range it fell in: files, subdirectories
// (a range may begin inside one, which then is on two pages),
// subdirectories with a placeholder object, and a file hidden by a
// directory of the same name.
func TestBigListingInRanges(t *testing.T) {
	const files = 5000
	emu := testemu.Start(t, emulator.Options{Buckets: []string{testBucket}, Seeded: true})
	var seeds []emulator.Seed
	want := map[string]bool{}
	add := func(name string) { seeds = append(seeds, emulator.Seed{Name: name, Data: []byte("x\n")}) }
	for i := range files {
		add(fmt.Sprintf("big/f%05d", i))
		want[fmt.Sprintf("f%05d", i)] = true
		if i%37 == 0 {
			// A subdirectory whose many objects span ranges.
			for j := range 30 {
				add(fmt.Sprintf("big/f%05d.d/x%02d", i, j))
			}
			want[fmt.Sprintf("f%05d.d", i)] = true
		}
		if i%101 == 0 {
			add(fmt.Sprintf("big/f%05d.p/", i)) // a placeholder, nothing under it
			want[fmt.Sprintf("f%05d.p", i)] = true
		}
	}
	add("big/f00074/y") // the file big/f00074 is hidden behind this directory
	if _, err := emu.PutMany(testBucket, slices.Values(seeds)); err != nil {
		t.Fatal(err)
	}
	m := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", "1h"}})
	ents, err := os.ReadDir(m.path("big"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range ents {
		if seen[e.Name()] {
			t.Errorf("%s listed twice", e.Name())
		}
		seen[e.Name()] = true
		if !want[e.Name()] {
			t.Errorf("%s listed, not in the bucket", e.Name())
		}
		if wantDir := e.Name() == "f00074" || len(e.Name()) > 6; e.IsDir() != wantDir {
			t.Errorf("%s: directory %v, want %v", e.Name(), e.IsDir(), wantDir)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("%s missing from the listing", name)
		}
	}
	if len(ents) != len(want) {
		t.Errorf("%d entries, want %d", len(ents), len(want))
	}
}

// seedBig seeds dir/ with files f00000.. and returns their names.
func seedBig(t *testing.T, emu *emulator.Server, dir string, files int) map[string]bool {
	t.Helper()
	var seeds []emulator.Seed
	want := map[string]bool{}
	for i := range files {
		name := fmt.Sprintf("f%05d", i)
		seeds = append(seeds, emulator.Seed{Name: dir + name, Data: []byte("x\n")})
		want[name] = true
	}
	if _, err := emu.PutMany(testBucket, slices.Values(seeds)); err != nil {
		t.Fatal(err)
	}
	return want
}

// holdRanges makes the emulator hold every listing request for a name
// range (startOffset) until the returned release is called (also at the
// test's end).
func holdRanges(t *testing.T, emu *emulator.Server) (release func()) {
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	emu.SetHook(func(r *http.Request) (int, bool) {
		if r.URL.Query().Get("startOffset") != "" {
			select {
			case <-ch:
			case <-r.Context().Done():
			}
		}
		return 0, false
	})
	t.Cleanup(func() { release(); emu.SetHook(nil) })
	return release
}

// TestReaddirServesFirstNamesWhileTheRestComes: a reader of a cold
// directory of more names than a page holds gets the first names while
// the rest of the listing is still on its way (issue 35), and in the end
// every name once.
func TestReaddirServesFirstNamesWhileTheRestComes(t *testing.T) {
	emu := testemu.Start(t, emulator.Options{Buckets: []string{testBucket}, Seeded: true})
	want := seedBig(t, emu, "big/", 5000)
	m := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", "1h"}})
	release := holdRanges(t, emu)

	d, err := os.Open(m.path("big"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	type result struct {
		names []string
		err   error
	}
	first := make(chan result, 1)
	go func() {
		names, err := d.Readdirnames(200)
		first <- result{names, err}
	}()
	var seen []string
	select {
	case r := <-first:
		if r.err != nil {
			t.Fatal(r.err)
		}
		seen = r.names
	case <-time.After(60 * time.Second): // a failure's bound, not a wait for something that comes
		release()
		t.Fatal("no names read in 60 s while the listing's name ranges were held")
	}
	release()
	rest, err := d.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	seen = append(seen, rest...)
	got := map[string]bool{}
	for _, n := range seen {
		if got[n] {
			t.Errorf("%s read twice", n)
		}
		got[n] = true
		if !want[n] {
			t.Errorf("%s read, not in the bucket", n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d names read, want %d", len(got), len(want))
	}
}

// TestReaddirFailingMidwayReportsIt: a listing whose later ranges fail
// gives the names it had, then an error; it is not taken for the whole
// directory (a read to the end with no error would say the rest is not
// there).
func TestReaddirFailingMidwayReportsIt(t *testing.T) {
	emu := testemu.Start(t, emulator.Options{Buckets: []string{testBucket}, Seeded: true})
	seedBig(t, emu, "big/", 5000)
	m := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", "1h"}})
	emu.SetHook(func(r *http.Request) (int, bool) {
		return http.StatusForbidden, r.URL.Query().Get("startOffset") != ""
	})
	t.Cleanup(func() { emu.SetHook(nil) })
	d, err := os.Open(m.path("big"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err == nil {
		t.Fatalf("%d names read and no error, from a listing whose ranges failed", len(names))
	}
	if len(names) == 0 {
		t.Errorf("no names before the error (%v); want the first page's", err)
	}
	t.Logf("%d names, then %v", len(names), err)
	emu.SetHook(nil)
	// A new listing, once the bucket answers, has them all.
	ents, err := os.ReadDir(m.path("big"))
	if err != nil || len(ents) != 5000 {
		t.Errorf("listed again: %d names, %v; want 5000", len(ents), err)
	}
}

// TestLongListingAsksNothingPerName: ls -l of a cold directory (a read
// of it, then a stat of each name) asks the bucket for its listing, not
// for each name: the names the kernel reads with their attributes
// (READDIRPLUS) while the listing is under way go without them, not
// looked up in the bucket one by one, and the stats after it are
// answered by the listing.
func TestLongListingAsksNothingPerName(t *testing.T) {
	emu := testemu.Start(t, emulator.Options{Buckets: []string{testBucket}, Seeded: true})
	want := seedBig(t, emu, "big/", 3000)
	m := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", "1h"}})
	var stats atomic.Int64
	emu.SetHook(func(r *http.Request) (int, bool) {
		if strings.Contains(r.URL.Path, "/o/big/") && r.Method == http.MethodGet {
			stats.Add(1) // a name in big/ asked for by itself
		}
		return 0, false
	})
	t.Cleanup(func() { emu.SetHook(nil) })
	ents, err := os.ReadDir(m.path("big"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if !want[e.Name()] || fi.Size() != 2 {
			t.Errorf("%s: size %d, in the bucket %v", e.Name(), fi.Size(), want[e.Name()])
		}
	}
	if len(ents) != len(want) {
		t.Errorf("%d names, want %d", len(ents), len(want))
	}
	if n := stats.Load(); n != 0 {
		t.Errorf("ls -l of %d names asked the bucket for %d objects one by one; want none", len(ents), n)
	}
}

// dirent is an entry of getdents64, with the offset after it.
type dirent struct {
	name string
	off  int64
}

// getdents reads a buffer's worth of entries from the directory fd.
func getdents(t *testing.T, fd int) []dirent {
	t.Helper()
	buf := make([]byte, 4096)
	n, err := syscall.Getdents(fd, buf)
	if err != nil {
		t.Fatal(err)
	}
	var out []dirent
	for i := 0; i < n; {
		reclen := int(binary.LittleEndian.Uint16(buf[i+16:]))
		name := buf[i+19 : i+reclen]
		if j := bytes.IndexByte(name, 0); j >= 0 {
			name = name[:j]
		}
		out = append(out, dirent{string(name), int64(binary.LittleEndian.Uint64(buf[i+8:]))})
		i += reclen
	}
	return out
}

// TestSeekdirInAStreamedListing: telldir and seekdir on a directory read
// while its listing comes: an offset met while reading goes back to the
// entry after it, and a rewind lists every name again.
func TestSeekdirInAStreamedListing(t *testing.T) {
	emu := testemu.Start(t, emulator.Options{Buckets: []string{testBucket}, Seeded: true})
	want := seedBig(t, emu, "big/", 5000)
	m := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", "1h"}})
	fd, err := syscall.Open(m.path("big"), syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	// While the listing's ranges are held: back to an entry of the first
	// page.
	release := holdRanges(t, emu)
	first := getdents(t, fd)
	if len(first) < 10 {
		t.Fatalf("%d entries in the first read", len(first))
	}
	if _, err := syscall.Seek(fd, first[4].off, 0); err != nil {
		t.Fatal(err)
	}
	if again := getdents(t, fd); len(again) == 0 || again[0].name != first[5].name {
		t.Errorf("a seek back while the listing comes: %v first, want %s", again[:min(len(again), 1)], first[5].name)
	}
	release()
	if _, err := syscall.Seek(fd, 0, 0); err != nil {
		t.Fatal(err)
	}
	var all []dirent
	for {
		ents := getdents(t, fd)
		if len(ents) == 0 {
			break
		}
		all = append(all, ents...)
	}
	if len(all) != len(want)+2 {
		t.Fatalf("%d entries, want %d and . and ..", len(all), len(want))
	}
	for _, k := range []int{1, 150, 2999, len(all) - 2} {
		if _, err := syscall.Seek(fd, all[k].off, 0); err != nil {
			t.Fatal(err)
		}
		ents := getdents(t, fd)
		if len(ents) == 0 || ents[0].name != all[k+1].name {
			t.Errorf("after a seek to the offset of entry %d (%s): %v, want %s first", k, all[k].name, ents[:min(len(ents), 1)], all[k+1].name)
		}
	}
	if _, err := syscall.Seek(fd, 0, 0); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for {
		ents := getdents(t, fd)
		if len(ents) == 0 {
			break
		}
		for _, e := range ents {
			if seen[e.name] {
				t.Errorf("%s twice after a rewind", e.name)
			}
			seen[e.name] = true
		}
	}
	if len(seen) != len(want)+2 {
		t.Errorf("%d entries after a rewind, want %d", len(seen), len(want)+2)
	}
}
