package integration

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
)

// lsLR walks dir as ls -lR does (a readdir of every directory and an
// lstat of every name) and returns what it saw, name and size, sorted,
// with a deadline so that a hung request fails the test.
func lsLR(t testing.TB, dir string) []string {
	t.Helper()
	type res struct {
		seen []string
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		var seen []string
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			st, err := os.Lstat(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			seen = append(seen, fmt.Sprintf("%s %d %v", rel, st.Size(), st.IsDir()))
			return nil
		})
		slices.Sort(seen)
		ch <- res{seen, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("ls -lR %s: %v", dir, r.err)
		}
		return r.seen
	case <-time.After(2 * time.Minute):
		t.Fatalf("ls -lR %s: no answer within 2 minutes", dir)
		return nil
	}
}

// putTree stores dirs directories of files objects each, and returns the
// object names.
func putNestedTree(t testing.TB, emu *emulator.Server, dirs, files int) {
	t.Helper()
	for d := range dirs {
		for f := range files {
			put(t, emu, fmt.Sprintf("d%02d/sub/f%03d", d, f), []byte(fmt.Sprintf("file %d of %d", f, d)))
		}
		put(t, emu, fmt.Sprintf("d%02d/top", d), []byte("top"))
	}
}

// A remount with a warm cache answers ls -lR of the directories it knew
// from CACHE_DIR/names.db: within the TTL with no request to the bucket
// at all; past it at once, even with a bucket that does not answer (its
// refreshes wait in the background).
func TestRemountAnswersFromNamesDB(t *testing.T) {
	emu := startEmulator(t, nil)
	putNestedTree(t, emu, 3, 5)
	cacheDir := t.TempDir()
	args := []string{"--metadata-ttl", "10m"}
	m := mount(t, emu, mountOpts{cacheDir: cacheDir, args: args})
	want := lsLR(t, m.dir)
	m.unmount(t)
	if _, err := os.Stat(filepath.Join(cacheDir, "names.db")); err != nil {
		t.Fatalf("no names.db after the unmount: %v", err)
	}

	m = mount(t, emu, mountOpts{cacheDir: cacheDir, args: args})
	before := emu.Requests()
	if got := lsLR(t, m.dir); !slices.Equal(got, want) {
		t.Errorf("after the remount ls -lR gives %q, want %q", got, want)
	}
	if n := emu.Requests() - before; n != 0 {
		t.Errorf("ls -lR after the remount, within the TTL, made %d requests to the bucket; want none", n)
	}
	m.unmount(t)

	// Past the TTL, the bucket black-holed: the known names answer at once.
	m = mount(t, emu, mountOpts{cacheDir: cacheDir, args: []string{"--metadata-ttl", "1ms"}})
	emu.SetHook(func(r *http.Request) (int, bool) {
		<-r.Context().Done()
		return http.StatusServiceUnavailable, true
	})
	defer emu.SetHook(nil)
	start := time.Now()
	if got := lsLR(t, m.dir); !slices.Equal(got, want) {
		t.Errorf("past the TTL with the bucket away, ls -lR gives %q, want %q", got, want)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("ls -lR past the TTL with the bucket away took %v; want it at once", d)
	}
	emu.SetHook(nil)
	m.unmount(t)
}

// Issue 18 item 3: once a listing has shown a newer version of a file
// (another client overwrote it), stat and read give the new version at
// once, although the kernel and the mount held the old one for a long
// TTL.
func TestListingShowsAnOverwriteAtOnce(t *testing.T) {
	emu := startEmulator(t, nil)
	old, cur := []byte("version one"), []byte("version two, longer")
	put(t, emu, "d/f", old)
	m := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", "10m"}})
	if got := readFile(t, m.path("d/f")); !bytes.Equal(got, old) {
		t.Fatalf("first read: %q", got)
	}
	put(t, emu, "d/f", cur)
	if _, err := os.ReadDir(m.path("d")); err != nil {
		t.Fatal(err)
	}
	// The kernel is told to drop its entry by the mount's notifier: a
	// moment after the listing, not within it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := os.Stat(m.path("d/f"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() == int64(len(cur)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stat after a listing showed the overwrite: %d bytes, want %d", st.Size(), len(cur))
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
	if got := readFile(t, m.path("d/f")); !bytes.Equal(got, cur) {
		t.Errorf("read after a listing showed the overwrite: %q, want %q", got, cur)
	}
}

// Past the TTL a name is answered at once from what is known and asked
// again in the background; when that refresh finds another version, the
// kernel is told to drop the entry it was just given, so that the new
// version shows one refresh after the TTL, not a second TTL later.
func TestRefreshTellsTheKernel(t *testing.T) {
	emu := startEmulator(t, nil)
	put(t, emu, "f", []byte("version one"))
	const ttl = 3 * time.Second
	m := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", ttl.String()}})
	statSize(t, m.path("f"), len("version one"))
	looked := time.Now()
	cur := []byte("version two, longer")
	put(t, emu, "f", cur)
	for {
		st, err := os.Stat(m.path("f"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() == int64(len(cur)) {
			break
		}
		// Without the note to the kernel, the stale answer given past
		// the TTL would be kept for a second TTL.
		if d := time.Since(looked); d > ttl+ttl/2 {
			t.Fatalf("the overwrite is not seen %v after the first lookup, with a TTL of %v", d, ttl)
		}
		time.Sleep(ttl / 30) // polling for the TTL to pass, which is what is tested
	}
	if got := readFile(t, m.path("f")); !bytes.Equal(got, cur) {
		t.Errorf("read %q, want %q", got, cur)
	}
}
