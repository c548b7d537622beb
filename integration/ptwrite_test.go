package integration

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/bucketfs/bucketfs/internal/testutil"
	"golang.org/x/sys/unix"
)

// Passthrough writes (issue 24), the default where FUSE passthrough
// works: the kernel writes new files and copies the cache holds whole
// straight into the cache file, as it writes a local disk. These tests
// check what that path changes: nobody but the kernel sees the writes.

// writeRequests returns how many WRITE requests the mount has served.
func writeRequests(t *testing.T, url string) float64 {
	t.Helper()
	return scrape(t, url)[`bucketfs_fuse_requests_total{op="write"}`]
}

// statOther returns the size and modification time of path as another
// process sees them (stat(1)).
func statOther(t *testing.T, path string) (int64, int64) {
	t.Helper()
	out, err := exec.Command("stat", "-c", "%s %.9Y", path).Output()
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	f := strings.Fields(string(out))
	size, err1 := strconv.ParseInt(f[0], 10, 64)
	mtime, err2 := strconv.ParseInt(strings.ReplaceAll(f[1], ".", ""), 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("stat printed %q", out)
	}
	return size, mtime
}

// While a new file and a cached one are written through passthrough,
// another process sees their size and modification time move with every
// write, and no write reaches the daemon; the bucket gets every byte.
func TestPassthroughWritesSeenByOthers(t *testing.T) {
	emu := startEmulator(t, nil)
	orig := testutil.RandomBytes(2*mib, 301)
	put(t, emu, "old", orig)
	m := mount(t, emu, mountOpts{args: []string{"--metrics-addr", "127.0.0.1:0", "--write-back-delay", "1h"}})
	url := m.metricsURL(t)
	if got := readFile(t, m.path("old")); !bytes.Equal(got, orig) {
		t.Fatal("first read differs")
	}
	before := writeRequests(t, url)
	want := map[string][]byte{"new": nil, "old": bytes.Clone(orig)}
	for _, name := range []string{"new", "old"} {
		f, err := os.OpenFile(m.path(name), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		_, lastMtime := statOther(t, m.path(name))
		for i := range 4 {
			chunk := testutil.RandomBytes(mib, uint64(310+i))
			off := int64(len(want[name]))
			if _, err := f.WriteAt(chunk, off); err != nil {
				t.Fatalf("%s: write %d: %v", name, i, err)
			}
			want[name] = append(want[name], chunk...)
			size, mtime := statOther(t, m.path(name))
			if size != int64(len(want[name])) {
				t.Errorf("%s: another process sees %d bytes after write %d, want %d", name, size, i, len(want[name]))
			}
			if mtime < lastMtime {
				t.Errorf("%s: the modification time went back after write %d", name, i)
			}
			lastMtime = mtime
		}
		if err := f.Close(); err != nil {
			t.Fatalf("%s: close: %v", name, err)
		}
	}
	if d := writeRequests(t, url) - before; d != 0 {
		t.Errorf("%v WRITE requests reached the daemon, want 0 (the kernel writes the cache files)", d)
	}
	m.unmount(t)
	for name, data := range want {
		if got := object(t, emu, name); !bytes.Equal(got, data) {
			t.Errorf("%s: the bucket holds %d bytes, not the %d written", name, len(got), len(data))
		}
	}
}

// Two processes append to one file through passthrough (O_APPEND, each
// its own open): every record lands whole, none over another, and the
// bucket gets them all.
func TestAppendFromTwoProcesses(t *testing.T) {
	emu := startEmulator(t, nil)
	put(t, emu, "log", []byte("first line of the log, from the bucket\n"))
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "1h"}})
	start := readFile(t, m.path("log"))
	const records = 300
	// Each shell opens the file with O_APPEND once (>>) and writes one
	// fixed-size line per printf.
	script := `for i in $(seq 1 ` + strconv.Itoa(records) + `); do printf '%s %05d ..............................\n' "$1" "$i"; done >>"$2"`
	var cmds []*exec.Cmd
	for _, who := range []string{"A", "B"} {
		c := exec.Command("sh", "-c", script, "sh", who, m.path("log"))
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("appending: %v", err)
		}
	}
	check := func(where string, got []byte) {
		t.Helper()
		if !bytes.HasPrefix(got, start) {
			t.Fatalf("%s: the first line was overwritten", where)
		}
		lines := strings.Split(strings.TrimSuffix(string(got[len(start):]), "\n"), "\n")
		next := map[string]int{"A": 1, "B": 1}
		for _, l := range lines {
			var who string
			var i int
			if _, err := fmt.Sscanf(l, "%s %d", &who, &i); err != nil || len(l) != 38 || next[who] != i {
				t.Fatalf("%s: line %q is torn or out of order (next of %s: %d)", where, l, who, next[who])
			}
			next[who]++
		}
		if next["A"] != records+1 || next["B"] != records+1 {
			t.Fatalf("%s: %d and %d records, want %d each", where, next["A"]-1, next["B"]-1, records)
		}
	}
	check("the mount", readFile(t, m.path("log")))
	m.unmount(t)
	check("the bucket", object(t, emu, "log"))
}

// A kill -9 of the daemon while files are open for writing through
// passthrough, with written pages not yet sent and never fsynced: the
// kernel holds them in the cache files, so the next mount on that cache
// finds them, and sends them.
func TestKillWithPassthroughWritesUnsent(t *testing.T) {
	emu := startEmulator(t, nil)
	orig := testutil.RandomBytes(3*mib, 320)
	put(t, emu, "old", orig)
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "1h"}})
	if got := readFile(t, m.path("old")); !bytes.Equal(got, orig) {
		t.Fatal("first read differs")
	}
	fresh := testutil.RandomBytes(5*mib+123, 321)
	patch := testutil.RandomBytes(mib, 322)
	want := map[string][]byte{"new": fresh, "old": append(bytes.Clone(orig[:2*mib]), patch...)}
	var open []*os.File
	for name, off := range map[string]int64{"new": 0, "old": 2 * mib} {
		f, err := os.OpenFile(m.path(name), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		data := fresh
		if name == "old" {
			data = patch
		}
		if _, err := f.WriteAt(data, off); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		open = append(open, f)
	}
	m.crash(t) // the files are still open: no close, no flush, no fsync
	for _, f := range open {
		f.Close() // the connection is gone: whatever this answers
	}
	m = mount(t, emu, mountOpts{cacheDir: m.cacheDir, args: []string{"--write-back-delay", "1h"}})
	for name, data := range want {
		if got := readFile(t, m.path(name)); !bytes.Equal(got, data) {
			t.Errorf("%s: after the crash the mount shows %d bytes, not the %d written", name, len(got), len(data))
		}
	}
	m.unmount(t)
	for name, data := range want {
		if got := object(t, emu, name); !bytes.Equal(got, data) {
			t.Errorf("%s: the bucket holds %d bytes, not the %d written", name, len(got), len(data))
		}
	}
}

// The kernel writes a passthrough file past the largest object GCS
// stores (a 1-byte write at 5 TiB, a sparse cache file): nothing holds
// the write back, as nothing would on a local disk, but fsync and close
// answer EFBIG, the file is not sent (no 5 TiB upload), the unmount names
// it, and once truncated it is sent.
func TestPassthroughWritePastObjectSize(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "0", "--flush-timeout", "3s"}})
	probe := filepath.Join(m.cacheDir, "sparse-probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(probe, 5<<40+1); err != nil {
		t.Skipf("the cache's disk does not hold a 5 TiB sparse file: %v", err)
	}
	os.Remove(probe)
	f, err := os.Create(m.path("huge"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("x"), 5<<40); err != nil {
		f.Close()
		t.Fatalf("a 1-byte write at 5 TiB: %v, want it to land, as on the cache's disk", err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("fsync of a file past 5 TiB: %v, want EFBIG", err)
	}
	if err := f.Close(); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("close of a file past 5 TiB: %v, want EFBIG", err)
	}
	// Nothing is sent: the uploader names it as refused instead.
	m.logs.waitFor(t, "a GCS object holds at most 5 TiB", 30*time.Second)
	if len(listObjects(t, emu, "huge")) != 0 {
		t.Fatal("a file past 5 TiB reached the bucket")
	}
	if err := os.Truncate(m.path("huge"), 3); err != nil {
		t.Fatalf("truncating it back: %v", err)
	}
	m.unmount(t)
	if got := object(t, emu, "huge"); !bytes.Equal(got, []byte{0, 0, 0}) {
		t.Errorf("after the truncation the bucket holds %q", got)
	}
}

// An open for writing of a cached file that writes nothing sends nothing
// (TestOpenWithoutWriteSendsNothing); these are the opens that do write,
// in ways that leave its size alone, and must each be sent: a pwrite in
// place, a store through mmap, a write before and after a time set
// through the descriptor (touch -d's futimens).
func TestPassthroughWritesInPlaceAreSent(t *testing.T) {
	emu := startEmulator(t, nil)
	orig := testutil.RandomBytes(256<<10, 330)
	cases := []string{"pwrite", "mmap", "write-then-time", "time-then-write"}
	for _, name := range cases {
		put(t, emu, name, orig)
	}
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "1h"}})
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	setTime := func(f *os.File) {
		// futimens(3): utimensat with no path, on the descriptor.
		ts := [2]unix.Timespec{unix.NsecToTimespec(past.UnixNano()), unix.NsecToTimespec(past.UnixNano())}
		if _, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, f.Fd(), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0); errno != 0 {
			t.Fatalf("futimens: %v", errno)
		}
	}
	patch := []byte("written in place")
	want := append(bytes.Clone(orig[:1000]), patch...)
	want = append(want, orig[1000+len(patch):]...)
	for _, name := range cases {
		if got := readFile(t, m.path(name)); !bytes.Equal(got, orig) {
			t.Fatalf("%s: first read differs", name)
		}
		f, err := os.OpenFile(m.path(name), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		switch name {
		case "pwrite":
			_, err = f.WriteAt(patch, 1000)
		case "mmap":
			var b []byte
			if b, err = syscall.Mmap(int(f.Fd()), 0, len(orig), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED); err == nil {
				copy(b[1000:], patch)
				err = syscall.Munmap(b)
			}
		case "write-then-time":
			_, err = f.WriteAt(patch, 1000)
			setTime(f)
		case "time-then-write":
			setTime(f)
			_, err = f.WriteAt(patch, 1000)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := f.Close(); err != nil {
			t.Fatalf("%s: close: %v", name, err)
		}
		if got := readFile(t, m.path(name)); !bytes.Equal(got, want) {
			t.Errorf("%s: the mount shows other bytes than written", name)
		}
	}
	st, err := os.Stat(m.path("write-then-time"))
	if err != nil || !st.ModTime().Equal(past) {
		t.Errorf("write-then-time: modification time %v (%v), want %v", st.ModTime(), err, past)
	}
	m.unmount(t)
	for _, name := range cases {
		if got := object(t, emu, name); !bytes.Equal(got, want) {
			t.Errorf("%s: the bucket does not hold what was written", name)
		}
	}
}

// A file the kernel writes itself may pass --cache-max-size while it is
// written (dirty data is bounded by the disk, not the cap): 24 MiB into
// an 8 MiB cache land whole, the cache counts them within a moment (not
// only at the close), and once closed the file is sent at once (changed
// bytes past 90% of the cap), after which the cache is back under its
// cap; the bucket holds every byte.
func TestPassthroughWritesPassTheCap(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: []string{"--cache-max-size", "8MiB", "--write-back-delay", "1h"}})
	data := testutil.RandomBytes(24*mib, 340)
	f, err := os.Create(m.path("big"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, err := f.Write(data); err != nil || n != len(data) {
		t.Fatalf("writing 24 MiB past an 8 MiB cap: %d bytes, %v", n, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for st := m.status(t); st.UsedBytes < int64(len(data)); st = m.status(t) {
		if time.Now().After(deadline) {
			t.Fatalf("the cache counts %d bytes 30s after 24 MiB were written", st.UsedBytes)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(60 * time.Second)
	for st := m.status(t); st.DirtyFiles > 0 || st.UsedBytes > st.MaxBytes; st = m.status(t) {
		if time.Now().After(deadline) {
			t.Fatalf("60s after the close: %d changed files, %d of %d bytes used", st.DirtyFiles, st.UsedBytes, st.MaxBytes)
		}
	}
	if got := object(t, emu, "big"); !bytes.Equal(got, data) {
		t.Fatalf("the bucket holds %d bytes, not the 24 MiB written", len(got))
	}
	m.unmount(t)
}

// A file the kernel writes itself until the cache's disk is full: the
// write answers ENOSPC, as on a local disk, with every byte before it
// kept (no WRITE reached the daemon); the file stays usable (truncated
// back, it is sent as it is then).
func TestPassthroughWriteFillsTheDisk(t *testing.T) {
	cacheDir := smallDisk(t, "1100m") // the 1 GiB of headroom passthrough writers need, and a little
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{cacheDir: cacheDir, args: []string{"--metrics-addr", "127.0.0.1:0",
		"--cache-min-free", "8MiB", "--write-back-delay", "1h"}})
	url := m.metricsURL(t)
	before := writeRequests(t, url)
	f, err := os.Create(m.path("fill"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := testutil.RandomBytes(mib, 350)
	var written int64
	for i := 0; ; i++ {
		binary.BigEndian.PutUint64(block, uint64(i)) // every MiB its own
		n, err := f.WriteAt(block, written)
		written += int64(n)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil || i > 1200 {
			t.Fatalf("after %d bytes: %v; want ENOSPC before 1200 MiB", written, err)
		}
	}
	if d := writeRequests(t, url) - before; d != 0 {
		t.Fatalf("%v WRITE requests reached the daemon: the file was not written by the kernel", d)
	}
	if written < 1<<30 {
		t.Errorf("ENOSPC after %d bytes, before the 1 GiB of headroom", written)
	}
	// At least what was acknowledged: tmpfs itself keeps part of a write
	// it answers ENOSPC (checked on Linux 6.18, 2026-11-27: a 20500k
	// tmpfs filled by 1 MiB writes is 20992000 bytes after 20971520
	// were acknowledged), and so does a cache file on it.
	if st, err := f.Stat(); err != nil || st.Size() < written || st.Size() > written+mib {
		t.Fatalf("fstat: %v, size %d; want the %d bytes acknowledged, and at most the refused MiB", err, st.Size(), written)
	}
	const keep = 3 * mib
	if err := f.Truncate(keep); err != nil {
		t.Fatalf("truncating the file on the full disk: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	m.unmount(t)
	got := object(t, emu, "fill")
	if len(got) != keep {
		t.Fatalf("the bucket holds %d bytes, want %d", len(got), keep)
	}
	for i := 0; i < keep/mib; i++ {
		binary.BigEndian.PutUint64(block, uint64(i))
		if !bytes.Equal(got[i*mib:(i+1)*mib], block) {
			t.Fatalf("MiB %d in the bucket is not what was written", i)
		}
	}
}

// An open for writing that writes nothing but fsyncs with --fsync remote
// sends the file (it is changed from the open, as far as anyone can
// tell), making a new generation; its close then keeps that generation,
// so a later write is sent on top of it, not taken for a conflict.
func TestFsyncRemoteOfAnOpenThatWritesNothing(t *testing.T) {
	emu := startEmulator(t, nil)
	orig := testutil.RandomBytes(64<<10, 360)
	put(t, emu, "f", orig)
	m := mount(t, emu, mountOpts{args: []string{"--fsync", "remote", "--write-back-delay", "0"}})
	if got := readFile(t, m.path("f")); !bytes.Equal(got, orig) {
		t.Fatal("first read differs")
	}
	f, err := os.OpenFile(m.path("f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err = os.OpenFile(m.path("f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("later"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync after a write: %v", err)
	}
	f.Close()
	m.unmount(t)
	want := append([]byte("later"), orig[5:]...)
	if got := object(t, emu, "f"); !bytes.Equal(got, want) {
		t.Error("the bucket does not hold the later write")
	}
	if c := listObjects(t, emu, "f.bucketfs-conflict-"); len(c) != 0 {
		t.Errorf("a conflict copy was made: %v", c)
	}
}
