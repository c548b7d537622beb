package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// warmJSON is what 'bucketfs warm --json' prints.
type warmJSON struct {
	Files        int   `json:"files"`
	TotalFiles   int   `json:"total_files"`
	Bytes        int64 `json:"bytes"`
	TotalBytes   int64 `json:"total_bytes"`
	AlreadyFiles int   `json:"already_files"`
	AlreadyBytes int64 `json:"already_bytes"`
	Failed       int   `json:"failed"`
	Errors       []struct {
		Object string `json:"object"`
		Err    string `json:"err"`
	} `json:"errors"`
	Pinned bool `json:"pinned"`
}

// warm runs 'bucketfs warm --json ARGS...' and returns its exit code,
// its result and its output.
func warm(t *testing.T, args ...string) (int, warmJSON, string) {
	t.Helper()
	code, out := runBucketfs(t, nil, append([]string{"warm", "--json"}, args...)...)
	var w warmJSON
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "{") {
			if err := json.Unmarshal([]byte(l), &w); err != nil {
				t.Fatalf("bucketfs warm --json printed %q: %v", l, err)
			}
		}
	}
	return code, w, out
}

// TestWarm: 'bucketfs warm' of directories of a mount fetches every file
// under them (a big one in several ranges), after which reading them all
// sends no request to the bucket; a second warm fetches nothing and
// pins; status shows the pins, unpin ends them; a failed object is
// reported with exit code 1, as is a set that does not fit the cache
// (before anything is fetched); pins survive a remount.
func TestWarm(t *testing.T) {
	emu := startEmulator(t, nil)
	want := map[string][]byte{}
	for d := range 3 {
		for f := range 30 {
			name := fmt.Sprintf("d%d/f%02d", d, f)
			want[name] = testutil.RandomBytes(16<<10, uint64(100*d+f))
		}
	}
	want["big/b"] = testutil.RandomBytes(3<<20+5, 7) // 4 ranges of 1 MiB
	for name, data := range want {
		put(t, emu, name, data)
	}
	put(t, emu, "bad/ok", []byte("fine"))
	put(t, emu, "bad/gone", []byte("listed, then gone"))
	put(t, emu, "huge/h", testutil.RandomBytes(14<<20, 8))
	m := mount(t, emu, mountOpts{args: []string{"--cache-max-size", "16MiB", "--prefetch-chunk-size", "1MiB"}})

	emu.ResetCounters()
	code, w, out := warm(t, m.path("d0"), m.path("d1"), m.path("d2"), m.path("big"))
	if code != 0 || w.TotalFiles != 91 || w.Files != 91 || w.Failed != 0 || w.AlreadyFiles != 0 || w.TotalBytes != 90*16<<10+3<<20+5 {
		t.Fatalf("warm exited %d with %+v, want 91 files fetched:\n%s", code, w, out)
	}
	if n := emu.MediaReads(testBucket, "big/b"); n != 4 {
		t.Errorf("big/b: %d media reads, want 4 (its ranges)", n)
	}

	// Everything warmed reads with no request at all.
	emu.ResetCounters()
	for name, data := range want {
		if got := readFile(t, m.path(name)); !bytes.Equal(got, data) {
			t.Fatalf("%s: read %d bytes that differ from the object's %d", name, len(got), len(data))
		}
	}
	for _, d := range []string{"d0", "d1", "d2", "big"} {
		if _, err := os.ReadDir(m.path(d)); err != nil {
			t.Fatal(err)
		}
	}
	if n := emu.Requests(); n != 0 {
		t.Errorf("reading the warmed files sent %d requests to the bucket, want 0", n)
	}

	// Again, pinned: nothing is fetched, all were there.
	code, w, out = warm(t, "--pin", m.path("d0"), m.path("d1"), m.path("d2"), m.path("big"))
	if code != 0 || w.TotalFiles != 91 || w.AlreadyFiles != 91 || !w.Pinned || emu.TotalMediaReads() != 0 {
		t.Fatalf("second warm exited %d with %+v (%d media reads), want 91 already there:\n%s", code, w, emu.TotalMediaReads(), out)
	}
	if st := m.status(t); st.PinnedFiles != 91 || st.PinnedBytes != w.TotalBytes {
		t.Errorf("status: %d pinned files, %d bytes; want 91, %d", st.PinnedFiles, st.PinnedBytes, w.TotalBytes)
	}
	if code, out := runBucketfs(t, nil, "status", m.dir); code != 0 || !strings.Contains(out, "pinned:      91 files") {
		t.Errorf("status exited %d, without the pinned line:\n%s", code, out)
	}

	// A set that does not fit beside what is kept fails before a fetch.
	emu.ResetCounters()
	code, _, out = warm(t, m.path("huge"))
	if code != 1 || !strings.Contains(out, "bytes are missing") || emu.TotalMediaReads() != 0 {
		t.Errorf("warm of 14 MiB beside 3.5 MiB in a 16 MiB cache exited %d after %d media reads, want 1 after none, saying what is missing:\n%s",
			code, emu.TotalMediaReads(), out)
	}
	if code, out := runBucketfs(t, nil, "unpin", m.path("d1")); code != 0 || !strings.Contains(out, "unpinned 30 files") {
		t.Errorf("unpin exited %d:\n%s", code, out)
	}
	if st := m.status(t); st.PinnedFiles != 61 {
		t.Errorf("after unpin of d1: %d pinned files, want 61", st.PinnedFiles)
	}

	// One object fails: it is named, the others are warmed, exit code 1.
	emu.SetHook(func(r *http.Request) (int, bool) {
		if r.URL.Query().Get("alt") == "media" && strings.HasSuffix(r.URL.Path, "/o/bad/gone") {
			return http.StatusNotFound, true
		}
		return 0, false
	})
	code, w, out = warm(t, filepath.Join(m.dir, "bad"))
	if code != 1 || w.Files != 2 || w.Failed != 1 || len(w.Errors) != 1 || w.Errors[0].Object != "bad/gone" {
		t.Errorf("warm with one object gone exited %d with %+v, want 1 naming bad/gone:\n%s", code, w, out)
	}
	emu.SetHook(nil)

	// The pins are in the cache's records: a remount keeps them.
	m.unmount(t)
	m = mount(t, emu, mountOpts{cacheDir: m.cacheDir, args: []string{"--cache-max-size", "16MiB", "--prefetch-chunk-size", "1MiB"}})
	if st := m.status(t); st.PinnedFiles != 61 {
		t.Errorf("after a remount: %d pinned files, want 61", st.PinnedFiles)
	}
}

// TestWarmUnpinPaths: the paths 'bucketfs warm' and 'unpin' take. A
// path that does not exist is refused by warm, naming it; a path outside
// any bucketfs mount too. unpin takes a path whose object is gone from
// the bucket (its pinned copy stays until unpinned, and its name no
// longer shows in the mount), and a path reached through a symbolic link
// to the mount; warm takes a symbolic link to a directory of the mount.
func TestWarmUnpinPaths(t *testing.T) {
	emu := startEmulator(t, nil)
	put(t, emu, "p/keep", []byte("kept"))
	put(t, emu, "p/gone", []byte("gone from the bucket later"))
	m := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", "0", "--metadata-strict"}})

	code, _, out := warm(t, m.path("p/nothing"))
	if code != 1 || !strings.Contains(out, m.path("p/nothing")) || !strings.Contains(out, "does not exist") {
		t.Errorf("warm of a missing path exited %d, want 1 saying it does not exist:\n%s", code, out)
	}
	outside := t.TempDir()
	code, _, out = warm(t, outside)
	if code != 1 || !strings.Contains(out, "is not in a bucketfs mount") {
		t.Errorf("warm of a path outside the mount exited %d, want 1 saying so:\n%s", code, out)
	}

	link := filepath.Join(t.TempDir(), "to-mount")
	if err := os.Symlink(m.dir, link); err != nil {
		t.Fatal(err)
	}
	code, w, out := warm(t, "--pin", filepath.Join(link, "p"))
	if code != 0 || w.Files != 2 || !w.Pinned {
		t.Fatalf("warm --pin through a symlink to the mount exited %d with %+v, want 2 files:\n%s", code, w, out)
	}
	direct := filepath.Join(t.TempDir(), "to-p")
	if err := os.Symlink(m.path("p"), direct); err != nil {
		t.Fatal(err)
	}
	code, w, out = warm(t, direct)
	if code != 0 || w.AlreadyFiles != 2 {
		t.Fatalf("warm of a symlink to a directory of the mount exited %d with %+v, want 2 files already there:\n%s", code, w, out)
	}
	if err := emu.Delete(testBucket, "p/gone"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "p/gone to leave the mount", 30*time.Second, func() bool {
		_, err := os.Lstat(m.path("p/gone"))
		return errors.Is(err, os.ErrNotExist)
	})
	if code, out := runBucketfs(t, nil, "unpin", m.path("p/gone")); code != 0 || !strings.Contains(out, "unpinned 1 files") {
		t.Errorf("unpin of a pinned file gone from the bucket exited %d, want 0 unpinning 1:\n%s", code, out)
	}
	if code, out := runBucketfs(t, nil, "unpin", filepath.Join(link, "p", "keep")); code != 0 || !strings.Contains(out, "unpinned 1 files") {
		t.Errorf("unpin through a symlink to the mount exited %d, want 0 unpinning 1:\n%s", code, out)
	}
	if st := m.status(t); st.PinnedFiles != 0 {
		t.Errorf("after both unpins: %d pinned files, want 0", st.PinnedFiles)
	}
}

// TestWarmInterruptedWhileWalking: Ctrl-C while 'bucketfs warm' walks the
// directories (before it asks the mount) stops the walk: the command
// used to read every directory left first, each a listing request to
// the bucket, and only then say it had stopped.
func TestWarmInterruptedWhileWalking(t *testing.T) {
	emu := startEmulator(t, nil)
	const dirs = 1000
	for d := range dirs {
		put(t, emu, fmt.Sprintf("w/d%04d/f", d), []byte("x"))
	}
	m := mount(t, emu, mountOpts{})
	var lists atomic.Int64 // listings of w's subdirectories
	emu.SetHook(func(r *http.Request) (int, bool) {
		if strings.HasPrefix(r.URL.Query().Get("prefix"), "w/d") {
			lists.Add(1)
		}
		return 0, false
	})
	// The walk takes a while: 1000 listings, 16 at a time, each 20 ms.
	emu.SetWAN(&emulator.WANProfile{Latency: 20 * time.Millisecond})

	cmd := exec.Command(binPath, "warm", "--json", m.path("w"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waitUntil(t, "the walk to list subdirectories", time.Minute, func() bool { return lists.Load() > 0 })
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	at := lists.Load()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out.String(), "stopped") {
			t.Errorf("warm interrupted ended with %v, want exit code 1 saying it stopped:\n%s", err, out.String())
		}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatal("warm did not end within 2 minutes of its interrupt")
	}
	emu.SetWAN(nil)
	if n := lists.Load() - at; n > 200 {
		t.Errorf("the walk listed %d more directories after the interrupt (of %d), want it to stop", n, dirs)
	}
}
