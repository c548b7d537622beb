package integration

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
)

// The limits of issue 16 (items 4 and 6) on a real mount: the largest
// file, the cap on changed bytes, and a cache disk smaller than the cap.

const mib = 1 << 20

// dataBytes is the disk space the cache files of cacheDir take.
func dataBytes(t *testing.T, cacheDir string) int64 {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(cacheDir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, de := range des {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(cacheDir, "data", de.Name()), &st); err == nil {
			n += st.Blocks * 512
		}
	}
	return n
}

// pwriteAll writes data at off in 1 MiB pwrites until one fails; it
// returns the bytes written and the error.
func pwriteAll(fd int, data []byte, off int64) (int64, error) {
	var done int64
	for done < int64(len(data)) {
		end := min(done+mib, int64(len(data)))
		n, err := syscall.Pwrite(fd, data[done:end], off+done)
		done += int64(max(n, 0))
		if err != nil {
			return done, err
		}
		if n == 0 {
			return done, errors.New("pwrite wrote nothing")
		}
	}
	return done, nil
}

// With writes through the daemon (--passthrough-writes=false; passthrough
// reads on, as by default), no file grows past --cache-max-size, through
// any call: 200 MiB written into an open, fully cached file stop
// at the cap with EFBIG, a 1-byte write at 1 TiB, a
// truncate and an fallocate past it fail with EFBIG, the cache files
// never take more than the cap, and the bucket gets exactly what was
// acknowledged. (Writes the kernel makes itself, the default, may pass
// the cap: TestPassthroughWritesPassTheCap.)
func TestFileSizeLimitThroughMount(t *testing.T) {
	emu := startEmulator(t, nil)
	const capBytes = 64 * mib
	orig := testutil.RandomBytes(8*mib, 161)
	put(t, emu, "f", orig)
	args := []string{"--cache-max-size", "64MiB", "--write-back-delay", "1h", "--passthrough-writes=false"}
	m := mount(t, emu, mountOpts{args: args})
	if got := readFile(t, m.path("f")); !bytes.Equal(got, orig) {
		t.Fatal("first read differs")
	}
	w, err := os.OpenFile(m.path("f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	fd := int(w.Fd())
	data := testutil.RandomBytes(200*mib, 162)
	n, err := pwriteAll(fd, data, 0)
	if !errors.Is(err, syscall.EFBIG) || n != capBytes {
		t.Fatalf("writing 200 MiB with a 64 MiB cap: %d bytes written, then %v; want %d, then EFBIG", n, err, capBytes)
	}
	if _, err := syscall.Pwrite(fd, []byte{1}, 1<<40); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("1-byte pwrite at 1 TiB: %v, want EFBIG", err)
	}
	if err := syscall.Ftruncate(fd, capBytes+1); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("ftruncate past the cap: %v, want EFBIG", err)
	}
	if err := syscall.Truncate(m.path("f"), 1<<40); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("truncate to 1 TiB: %v, want EFBIG", err)
	}
	if err := syscall.Fallocate(fd, 0, 0, capBytes+1); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("fallocate past the cap: %v, want EFBIG", err)
	}
	if err := syscall.Fallocate(fd, 0, 0, capBytes); err != nil {
		t.Errorf("fallocate up to the cap: %v", err)
	}
	if st, err := w.Stat(); err != nil || st.Size() != capBytes {
		t.Errorf("fstat: %v, size %d; want %d", err, st.Size(), capBytes)
	}
	if d := dataBytes(t, m.cacheDir); d > capBytes+mib {
		t.Errorf("cache files take %d bytes, over the %d cap", d, capBytes)
	}
	if st := m.status(t); st.UsedBytes > st.MaxBytes {
		t.Errorf("status: %d of %d bytes used", st.UsedBytes, st.MaxBytes)
	}
	w.Close()
	m.unmount(t)
	want := data[:capBytes]
	if got := object(t, emu, "f"); !bytes.Equal(got, want) {
		t.Fatalf("bucket holds %d bytes, want the %d acknowledged", len(got), len(want))
	}
	m = mount(t, emu, mountOpts{cacheDir: m.cacheDir, args: args})
	if got := readFile(t, m.path("f")); !bytes.Equal(got, want) {
		t.Errorf("after a remount the file has %d bytes, want %d", len(got), len(want))
	}
	m.unmount(t)
}

// A writer opened while a passthrough reader holds the file must be
// passthrough too (the kernel refuses any other open then): the daemon
// does not see its writes, but counts its growth within a few seconds,
// not only at its close.
func TestForcedPassthroughWriterIsCounted(t *testing.T) {
	emu := startEmulator(t, nil)
	orig := testutil.RandomBytes(8*mib, 165)
	put(t, emu, "f", orig)
	args := []string{"--cache-max-size", "64MiB", "--write-back-delay", "1h"}
	m := mount(t, emu, mountOpts{args: args})
	if got := readFile(t, m.path("f")); !bytes.Equal(got, orig) {
		t.Fatal("first read differs")
	}
	// A new mount, so that no handle of that read (the kernel releases
	// them asynchronously) keeps the inode in the caching io mode.
	m.unmount(t)
	m = mount(t, emu, mountOpts{cacheDir: m.cacheDir, args: args})
	r, err := os.Open(m.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := os.OpenFile(m.path("f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("opening for writing next to a reader: %v", err)
	}
	defer w.Close()
	more := testutil.RandomBytes(20*mib, 166)
	wrote := daemonWrote(t, m)
	if n, err := pwriteAll(int(w.Fd()), more, 8*mib); err != nil {
		t.Fatalf("write: %d bytes, %v", n, err)
	}
	if d := daemonWrote(t, m) - wrote; d > 10*mib {
		t.Skipf("the daemon wrote %d bytes for the 20 MiB: passthrough is not engaged here", d)
	}
	deadline := time.Now().Add(20 * time.Second)
	for m.status(t).UsedBytes < 28*mib {
		if time.Now().After(deadline) {
			t.Fatalf("28 MiB written, the cache counts %d bytes 20s later", m.status(t).UsedBytes)
		}
		time.Sleep(100 * time.Millisecond) // polling the mount's status, with a deadline
	}
	buf := make([]byte, mib)
	if _, err := r.ReadAt(buf, 20*mib); err != nil || !bytes.Equal(buf, more[12*mib:13*mib]) {
		t.Errorf("the reader does not see the written bytes (%v)", err)
	}
	w.Close()
	r.Close()
	m.unmount(t)
	if got := object(t, emu, "f"); !bytes.Equal(got, append(slices.Clip(orig), more...)) {
		t.Errorf("bucket holds %d bytes, want %d", len(got), len(orig)+len(more))
	}
}

// daemonWrote is the bytes the mount's process has written (wchar).
func daemonWrote(t *testing.T, m *mountProc) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", m.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no wchar in /proc/PID/io")
	return 0
}

// When changed files near the cap, they are uploaded at once, whatever
// the write-back delay, and the cache never reports more used than its
// cap.
func TestChangesNearCapUploadEarly(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: []string{"--cache-max-size", "64MiB", "--write-back-delay", "1h"}})
	files := map[string][]byte{}
	for i := range 2 {
		name := fmt.Sprintf("near-%d", i)
		files[name] = testutil.RandomBytes(30*mib, uint64(170+i)) // 60 MiB in all: 94% of the cap
		if err := os.WriteFile(m.path(name), files[name], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := m.status(t)
		if st.UsedBytes > st.MaxBytes {
			t.Fatalf("status: %d of %d bytes used", st.UsedBytes, st.MaxBytes)
		}
		if st.DirtyFiles == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("changed files at 94%% of the cap wait for their 1h delay: %d files, %d bytes not uploaded", st.DirtyFiles, st.DirtyBytes)
		}
		time.Sleep(100 * time.Millisecond) // polling the mount's status, with a deadline
	}
	for name, data := range files {
		if got := object(t, emu, name); !bytes.Equal(got, data) {
			t.Errorf("bucket's %s: %d bytes, want %d", name, len(got), len(data))
		}
	}
	m.unmount(t)
}

// smallDisk mounts a tmpfs of size bytes for a cache dir; it is taken
// down after the test's mounts (cleanups run last first).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("mounting a small tmpfs for the cache needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return filepath.Join(dir, "cache")
}

// writeFile writes data to path in 1 MiB writes and closes it; it
// returns the bytes acknowledged (writes that returned, and a close that
// succeeded) and the first error.
func writeFileAcked(path string, data []byte) ([]byte, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	n, err := pwriteAll(int(f.Fd()), data, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return data[:n], err
}

// fillDisk writes a file of zeros in dir until the disk is full; it
// returns the file's path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zero := make([]byte, 64<<10)
	for {
		if _, err := f.Write(zero); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			return path
		}
	}
}

// lsAndStatAgree checks that name shows in the root's listing exactly
// when stat finds it, and returns whether it exists.
func lsAndStatAgree(t *testing.T, m *mountProc, name string) bool {
	t.Helper()
	des, err := os.ReadDir(m.dir)
	if err != nil {
		t.Fatalf("ls: %v", err)
	}
	listed := slices.ContainsFunc(des, func(de os.DirEntry) bool { return de.Name() == name })
	_, err = os.Stat(m.path(name))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat %s: %v", name, err)
	}
	if stat := err == nil; listed != stat {
		t.Errorf("ls and stat disagree about %s: listed %v, stat finds it %v", name, listed, stat)
	}
	return listed
}

// A cache disk smaller than the cap: under the free-space floor clean
// copies are evicted (so writes keep working); once changes fill the
// disk, writes fail cleanly with ENOSPC; a full disk makes unlink,
// create and chmod fail or succeed, never half; and after the unmount
// (or a crash, then a mount that sends what is left) and a remount, the
// bucket holds exactly what was acknowledged.
func TestSmallCacheDisk(t *testing.T) {
	t.Run("unmount", func(t *testing.T) { smallCacheDisk(t, false) })
	t.Run("crash", func(t *testing.T) { smallCacheDisk(t, true) })
}

func smallCacheDisk(t *testing.T, crash bool) {
	cacheDir := smallDisk(t, "48m")
	emu := startEmulator(t, nil)
	clean := map[string][]byte{}
	for i := range 4 {
		name := fmt.Sprintf("clean-%d", i)
		clean[name] = testutil.RandomBytes(8*mib, uint64(180+i))
		put(t, emu, name, clean[name])
	}
	keep := testutil.RandomBytes(4096, 190)
	put(t, emu, "keep", keep)
	args := []string{"--cache-max-size", "1GiB", "--cache-min-free", "8MiB", "--write-back-delay", "1h", "--cache-full-wait", "2s"}
	m := mount(t, emu, mountOpts{cacheDir: cacheDir, args: args})
	for name, data := range clean {
		if got := readFile(t, m.path(name)); !bytes.Equal(got, data) {
			t.Fatalf("%s read wrong", name)
		}
	}
	// 32 MiB of clean copies on a 48 MiB disk: 20 MiB more fit only if
	// some are evicted for the 8 MiB floor.
	acked := map[string][]byte{}
	big := testutil.RandomBytes(20*mib, 191)
	got, err := writeFileAcked(m.path("big"), big)
	if err != nil {
		t.Fatalf("writing 20 MiB with clean copies to evict: %v (after %d bytes)", err, len(got))
	}
	acked["big"] = got
	if st := m.status(t); st.Evictions == 0 {
		t.Errorf("no clean copy was evicted for the floor: %+v", st)
	}

	// Changes fill the disk: uploads are refused, so nothing can be
	// evicted any more; writes end with ENOSPC, after what they
	// acknowledged.
	emu.SetHook(func(r *http.Request) (int, bool) { return 503, isUploadReq(r) })
	sawFull := false
	for i := 0; i < 6 && !sawFull; i++ {
		name := fmt.Sprintf("fill-%d", i)
		got, err := writeFileAcked(m.path(name), testutil.RandomBytes(8*mib, uint64(200+i)))
		switch {
		case errors.Is(err, syscall.ENOSPC):
			sawFull = true
		case err != nil:
			t.Fatalf("writing %s: %v, want success or ENOSPC", name, err)
		}
		acked[name] = got
	}
	if !sawFull {
		t.Fatal("writes never failed with ENOSPC on a 48 MiB disk full of changes")
	}

	// Now the disk itself is full: unlink and create either work or fail
	// with no trace.
	filler := fillDisk(t, filepath.Dir(cacheDir))
	// Use up the last page of the journal too: changes of metadata are
	// one journal write each.
	bigMode := os.FileMode(0o644)
	for i := 0; i < 500; i++ {
		mode := os.FileMode(0o600 | i%2*0o44)
		if err := os.Chmod(m.path("big"), mode); err != nil {
			t.Logf("chmod on a full disk failed after %d: %v", i, err)
			break
		}
		bigMode = mode
	}
	unlinkErr := os.Remove(m.path("keep"))
	t.Logf("unlink on a full disk: %v", unlinkErr)
	if exists := lsAndStatAgree(t, m, "keep"); exists != (unlinkErr != nil) {
		t.Errorf("after unlink (%v), keep exists: %v", unlinkErr, exists)
	}
	createErr := os.WriteFile(m.path("late"), []byte("late"), 0o644)
	t.Logf("create on a full disk: %v", createErr)
	lateShown := lsAndStatAgree(t, m, "late")
	if createErr == nil && !lateShown {
		t.Error("late was created but does not show")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	emu.SetHook(nil)
	if crash {
		// kill -9 right after the failures: the next mount replays the
		// journal and sends what the crash left.
		logs := m.logs.String()
		m.crash(t)
		m = mount(t, emu, mountOpts{cacheDir: cacheDir, args: args})
		m.logs.add(logs)
	}
	m.unmount(t)
	if strings.Contains(m.logs.String(), "refusing to remove") {
		t.Errorf("bogus refusal in the log:\n%s", m.logs.String())
	}
	check := func(where string, read func(name string) ([]byte, bool)) {
		t.Helper()
		for name, want := range acked {
			if got, ok := read(name); !ok || !bytes.Equal(got, want) {
				t.Errorf("%s: %s has %d bytes (present %v), want the %d acknowledged", where, name, len(got), ok, len(want))
			}
		}
		for name, want := range clean {
			if got, ok := read(name); !ok || !bytes.Equal(got, want) {
				t.Errorf("%s: clean %s changed (present %v)", where, name, ok)
			}
		}
		if got, ok := read("keep"); ok != (unlinkErr != nil) || (ok && !bytes.Equal(got, keep)) {
			t.Errorf("%s: keep present %v after an unlink that answered %v", where, ok, unlinkErr)
		}
		if got, ok := read("late"); createErr == nil && (!ok || string(got) != "late") {
			t.Errorf("%s: late (created: %v) present %v, %q", where, createErr, ok, got)
		}
	}
	check("bucket", func(name string) ([]byte, bool) {
		b := object(t, emu, name)
		return b, b != nil
	})
	m = mount(t, emu, mountOpts{cacheDir: cacheDir, args: args})
	if st, err := os.Stat(m.path("big")); err != nil || st.Mode().Perm() != bigMode {
		t.Errorf("after a remount big has mode %v (%v), want %v, the last chmod that succeeded", st.Mode().Perm(), err, bigMode)
	}
	check("after a remount", func(name string) ([]byte, bool) {
		b, err := os.ReadFile(m.path(name))
		return b, err == nil
	})
	m.unmount(t)
}
