package integration

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
)

// The FUSE writeback cache (--writeback-cache, fs/writeback.go): the
// kernel keeps written pages and sends them later. What it changes, on a
// real mount: who knows the size and time during writes, O_APPEND,
// where write errors show, and what a crash with pages not yet sent
// leaves.

// wbArgs are the flags of a mount with the writeback cache whose
// changes stay local until the test flushes them.
var wbArgs = []string{"--writeback-cache", "--write-back-delay", "1h"}

// fuseWrites is the number of WRITE requests the mount has answered.
func fuseWrites(t *testing.T, url string) float64 {
	return scrape(t, url)[`bucketfs_fuse_requests_total{op="write"}`]
}

// statByOther stats path from another process: its size and mtime.
func statByOther(t *testing.T, path string) (int64, time.Time) {
	t.Helper()
	out, err := exec.Command("stat", "-c", "%s %Y", path).CombinedOutput()
	if err != nil {
		t.Fatalf("stat %s: %v: %s", path, err, out)
	}
	var size, mtime int64
	if _, err := fmt.Sscan(string(out), &size, &mtime); err != nil {
		t.Fatalf("stat said %q: %v", out, err)
	}
	return size, time.Unix(mtime, 0)
}

// Another process sees the size and modification time of a file being
// written before the writer closes it, though the pages are still in the
// kernel (fewer WRITEs than write(2)s) and every stat asks bucketfs
// (--metadata-ttl 0), whose copy lags behind: its answers must not
// shrink the file or take its time back.
func TestWritebackSizeAndMtimeBeforeClose(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: append([]string{"--metrics-addr", "127.0.0.1:0", "--metadata-ttl", "0"}, wbArgs...)})
	url := m.metricsURL(t)
	f, err := os.Create(m.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := testutil.RandomBytes(2*mib, 241)
	before := fuseWrites(t, url)
	start := time.Now().Truncate(time.Second)
	const page = 4096
	for off := 0; off < mib; off += page {
		if _, err := f.Write(data[off : off+page]); err != nil {
			t.Fatal(err)
		}
	}
	if d := fuseWrites(t, url) - before; d >= mib/page {
		t.Errorf("%v WRITE requests for %d write(2)s: the writes were not buffered", d, mib/page)
	}
	for range 3 {
		size, mtime := statByOther(t, m.path("f"))
		if size != mib || mtime.Before(start) || mtime.After(time.Now()) {
			t.Fatalf("during the writes another process sees size %d, mtime %v; want %d, between %v and now", size, mtime, mib, start)
		}
	}
	if err := f.Sync(); err != nil { // the pages reach bucketfs
		t.Fatal(err)
	}
	if _, err := f.Write(data[mib:]); err != nil {
		t.Fatal(err)
	}
	if size, _ := statByOther(t, m.path("f")); size != 2*mib {
		t.Errorf("after more writes another process sees size %d, want %d", size, 2*mib)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if size, _ := statByOther(t, m.path("f")); size != 2*mib {
		t.Errorf("after the close another process sees size %d, want %d", size, 2*mib)
	}
	m.unmount(t)
	if got := object(t, emu, "f"); !bytes.Equal(got, data) {
		t.Errorf("the bucket holds %d bytes, not the %d written", len(got), len(data))
	}
}

// Two processes append lines to one file through descriptors opened with
// O_APPEND, at once: the kernel places each write at the end it knows;
// no line is lost, split or overwritten, on the mount or in the bucket.
func TestWritebackAppendFromTwoProcesses(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: wbArgs})
	path := m.path("log")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const lines = 300
	// One write(2) per line (echo is a builtin), on a descriptor kept
	// open with O_APPEND (>>).
	script := `exec 3>>"$0"; i=0; while [ $i -lt ` + strconv.Itoa(lines) + ` ]; do echo "$1-$i-0123456789abcdef" >&3; i=$((i+1)); done`
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for p, who := range []string{"A", "B"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := exec.Command("sh", "-c", script, path, who).CombinedOutput(); err != nil {
				errs[p] = fmt.Errorf("%s: %v: %s", who, err, out)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got := readFile(t, path)
	checkAppended(t, got, lines)
	m.unmount(t)
	if obj := object(t, emu, "log"); !bytes.Equal(obj, got) {
		t.Errorf("the bucket holds %d bytes, the mount showed %d", len(obj), len(got))
	}
}

// checkAppended checks that data holds every line "W-i-0123456789abcdef"
// of writers A and B, i < lines, once, each writer's in order.
func checkAppended(t *testing.T, data []byte, lines int) {
	t.Helper()
	next := map[string]int{"A": 0, "B": 0}
	for n, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		who, _, _ := strings.Cut(l, "-")
		want := fmt.Sprintf("%s-%d-0123456789abcdef", who, next[who])
		if _, ok := next[who]; !ok || l != want {
			t.Fatalf("line %d is %q, want %q (after %v)", n, l, want, next)
		}
		next[who]++
	}
	if next["A"] != lines || next["B"] != lines {
		t.Errorf("lines found: %v, want %d each", next, lines)
	}
}

// Write errors the kernel meets when it sends its pages reach the
// application at the latest at fsync(2) and close(2): the cap on changed
// bytes full, or the cache's disk down to its free-space floor, with
// uploads refused so no room can be made. What was acknowledged (a
// close that succeeded) is in the bucket after the flush; what a failed
// file left goes up as far as bucketfs took it: a prefix of what was
// written, nothing else.
func TestWritebackErrorsAtFsyncAndClose(t *testing.T) {
	t.Run("cap", func(t *testing.T) {
		wbErrors(t, "", []string{"--cache-max-size", "8MiB"}, 5*mib)
	})
	t.Run("disk", func(t *testing.T) {
		wbErrors(t, smallDisk(t, "24m"), []string{"--cache-min-free", "4MiB"}, 12*mib)
	})
}

// wbErrors writes a file of size bytes, then two more that cannot fit,
// one ended by fsync and close, one by close alone, on a mount with
// args and uploads refused.
func wbErrors(t *testing.T, cacheDir string, args []string, size int) {
	emu := startEmulator(t, nil)
	emu.SetHook(func(r *http.Request) (int, bool) { return 503, isUploadReq(r) })
	args = append(append(args, "--cache-full-wait", "1s"), wbArgs...)
	m := mount(t, emu, mountOpts{cacheDir: cacheDir, args: args})
	acked := testutil.RandomBytes(size, 242)
	if err := os.WriteFile(m.path("acked"), acked, 0o644); err != nil {
		t.Fatalf("the first %d bytes: %v", size, err)
	}
	written := map[string][]byte{}
	for _, how := range []string{"fsync", "close"} {
		data := testutil.RandomBytes(size, 243)
		written[how] = data
		f, err := os.Create(m.path(how))
		if err != nil {
			t.Fatal(err)
		}
		_, werr := f.Write(data)
		var serr error
		if how == "fsync" {
			serr = f.Sync()
		}
		cerr := f.Close()
		t.Logf("%s: write %v, fsync %v, close %v", how, werr, serr, cerr)
		switch {
		case how == "fsync" && werr == nil && serr == nil:
			t.Errorf("%d bytes more than fit: write and fsync succeeded", size)
		case how == "close" && werr == nil && cerr == nil:
			t.Errorf("%d bytes more than fit: write and close succeeded", size)
		}
	}
	emu.SetHook(nil)
	m.unmount(t)
	if got := object(t, emu, "acked"); !bytes.Equal(got, acked) {
		t.Errorf("acked: the bucket holds %d bytes, want the %d acknowledged", len(got), len(acked))
	}
	for name, data := range written {
		if got := object(t, emu, name); !bytes.HasPrefix(data, got) {
			t.Errorf("%s: the bucket holds %d bytes that are not a prefix of what was written", name, len(got))
		}
	}
}

// kill -9 of the daemon while written pages are still in the kernel:
// what was fsynced is kept; the rest is lost as a crash loses it, and
// what goes up is what the crash left in the copy, page by page either
// written bytes or zeros (a page the kernel never sent), never others.
func TestWritebackCrashKeepsFsynced(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: wbArgs})
	synced := testutil.RandomBytes(mib, 244)
	later := testutil.RandomBytes(mib, 245)
	f, err := os.Create(m.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(synced); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(later); err != nil {
		t.Fatal(err)
	}
	m.crash(t)
	f.Close() // the mount is gone: an error is expected
	m = mount(t, emu, mountOpts{cacheDir: m.cacheDir, args: wbArgs})
	got := readFile(t, m.path("f"))
	checkCrashLeft(t, "after the crash the mount", got, synced, later)
	m.unmount(t)
	if obj := object(t, emu, "f"); !bytes.Equal(obj, got) {
		t.Errorf("the bucket holds %d bytes, not the %d the mount showed after the crash", len(obj), len(got))
	}
}

// checkCrashLeft checks that got starts with synced, and that each page
// after it is later's page or zeros, no longer than later.
func checkCrashLeft(t *testing.T, where string, got, synced, later []byte) {
	t.Helper()
	if len(got) < len(synced) || !bytes.Equal(got[:len(synced)], synced) {
		t.Fatalf("%s has %d bytes, without the %d fsynced at its start", where, len(got), len(synced))
	}
	rest := got[len(synced):]
	if len(rest) > len(later) {
		t.Fatalf("%s has %d bytes, more than the %d written", where, len(got), len(synced)+len(later))
	}
	zero := make([]byte, 4096)
	for off := 0; off < len(rest); off += 4096 {
		end := min(off+4096, len(rest))
		if !bytes.Equal(rest[off:end], later[off:end]) && !bytes.Equal(rest[off:end], zero[:end-off]) {
			t.Fatalf("%s: the page at %d after the fsynced part is neither written bytes nor zeros", where, off)
		}
	}
	t.Logf("%s: %d bytes fsynced, %d of the %d written after it kept", where, len(synced), len(rest), len(later))
}

// With --fsync remote, fsync(2) through any descriptor of a file waits
// for the bucket. With the writeback cache the kernel sends the pages
// written through one descriptor through another (the last opened for
// writing), and then the FSYNC through the first, which had sent no
// WRITE itself; and a descriptor open for reading syncs what others
// wrote, as on a local disk. Both returned at once, with nothing sent,
// until fileHandle.syncWriter.
func TestWritebackFsyncThroughAnotherDescriptor(t *testing.T) {
	emu := startEmulator(t, nil)
	orig := testutil.RandomBytes(64<<10, 246)
	put(t, emu, "f", orig)
	m := mount(t, emu, mountOpts{args: append([]string{"--fsync", "remote"}, wbArgs...)})
	if got := readFile(t, m.path("f")); !bytes.Equal(got, orig) { // cached whole: writers open lazily
		t.Fatal("first read differs")
	}
	b, err := os.OpenFile(m.path("f"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a, err := os.OpenFile(m.path("f"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	r, err := os.Open(m.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Whole pages: a part of one would be read first, through the
	// descriptor written, which opens its writer.
	pageB, pageA := testutil.RandomBytes(4096, 247), testutil.RandomBytes(4096, 248)
	want := bytes.Clone(orig)
	copy(want, pageB)
	if _, err := b.WriteAt(pageB, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := object(t, emu, "f"); !bytes.Equal(got, want) {
		t.Errorf("after fsync through b, the bucket does not hold what b wrote")
	}
	copy(want[4096:], pageA)
	if _, err := a.WriteAt(pageA, 4096); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := object(t, emu, "f"); !bytes.Equal(got, want) {
		t.Errorf("after fsync through a descriptor open for reading, the bucket does not hold what a wrote")
	}
}
