package integration

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("readdir %s: %v", dir, err)
	}
	var out []string
	for _, de := range des {
		n := de.Name()
		if de.IsDir() {
			n += "/"
		}
		out = append(out, n)
	}
	return out
}

func TestListingNestedImplicitAndInvalid(t *testing.T) {
	emu := startEmulator(t, nil)
	long := strings.Repeat("x", 256)
	for _, n := range []string{
		"a.txt", "dir/b.txt", "dir/sub/c.txt",
		"implicit/x/y.txt", // no placeholder objects at all
		"explicit/",        // an empty directory made by a placeholder
		"explicit2/", "explicit2/f",
		// names that cannot be file names: hidden, with one warning each
		"bad//name", "dots/../x", "./lead", long, "ok/" + long,
		"clash", "clash/inner", // both a file and a directory: the directory wins
	} {
		put(t, emu, n, []byte("content of "+n))
	}
	m := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", "0"}})

	want := map[string][]string{
		"":           {"a.txt", "bad/", "clash/", "dir/", "dots/", "explicit/", "explicit2/", "implicit/", "ok/"},
		"bad":        nil, // "bad//name" has an empty segment: hidden
		"dir":        {"b.txt", "sub/"},
		"dir/sub":    {"c.txt"},
		"implicit":   {"x/"},
		"implicit/x": {"y.txt"},
		"explicit":   nil,
		"explicit2":  {"f"},
		"clash":      {"inner"},
		"ok":         nil,
		"dots":       nil,
	}
	for round := range 2 { // twice: warnings must not repeat
		for dir, w := range want {
			if got := names(t, m.path(dir)); !slices.Equal(got, w) {
				t.Errorf("round %d: ls %q = %q, want %q", round, dir, got, w)
			}
		}
	}
	if got := string(readFile(t, m.path("dir/sub/c.txt"))); got != "content of dir/sub/c.txt" {
		t.Errorf("dir/sub/c.txt = %q", got)
	}
	st, err := os.Stat(m.path("implicit/x"))
	if err != nil || !st.IsDir() {
		t.Errorf("stat implicit/x: %v, %v", st, err)
	}
	if _, err := os.Stat(m.path("missing")); !os.IsNotExist(err) {
		t.Errorf("stat missing: %v, want ENOENT", err)
	}
	st, err = os.Stat(m.path("a.txt"))
	if err != nil || st.Size() != int64(len("content of a.txt")) || st.Mode().Perm() != 0o644 {
		t.Errorf("stat a.txt: %v %v", st, err)
	}
	logs := m.logs.String()
	// One warning per hidden object, or per hidden prefix for names with a
	// bad segment before their last one.
	for _, n := range []string{"bad//", "dots/../", "./", long, "ok/" + long, "clash"} {
		if c := strings.Count(logs, "object="+n+" ") + strings.Count(logs, "object="+n+"\n"); c != 1 {
			t.Errorf("warnings about %q: %d, want 1", n, c)
		}
	}
}

func TestReadsAreByteExact(t *testing.T) {
	emu := startEmulator(t, nil)
	files := map[string][]byte{
		"empty":       {},
		"small":       testutil.RandomBytes(1000, 1),
		"chunk-exact": testutil.RandomBytes(256<<10, 2),
		"multi-chunk": testutil.RandomBytes(5<<20+12345, 3),
	}
	for n, b := range files {
		put(t, emu, n, b)
	}
	for _, pt := range []string{"true", "false"} {
		t.Run("passthrough="+pt, func(t *testing.T) {
			m := mount(t, emu, mountOpts{args: []string{"--prefetch-chunk-size", "256KiB", "--passthrough=" + pt}})
			for round := range 2 { // cold, then cached
				for n, b := range files {
					if got := readFile(t, m.path(n)); sum(got) != sum(b) {
						t.Errorf("round %d: %s: %d bytes, checksum differs from the object's %d bytes", round, n, len(got), len(b))
					}
				}
			}
			// A read straddling chunks, at an odd offset.
			f, err := os.Open(m.path("multi-chunk"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, 300<<10)
			off := int64(256<<10 - 777)
			if _, err := f.ReadAt(buf, off); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf, files["multi-chunk"][off:off+int64(len(buf))]) {
				t.Error("pread across a chunk boundary returned wrong bytes")
			}
		})
	}
}

func TestConcurrentReadersShareOneDownload(t *testing.T) {
	emu := startEmulator(t, nil)
	data := testutil.RandomBytes(4<<20, 4)
	put(t, emu, "shared", data)
	m := mount(t, emu, mountOpts{args: []string{"--prefetch-chunk-size", "256KiB"}})
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := os.ReadFile(m.path("shared"))
			if err != nil {
				errs <- err.Error()
			} else if sum(got) != sum(data) {
				errs <- "checksum mismatch"
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	const chunks = 16 // 4 MiB / 256 KiB
	if got := emu.MediaReads(testBucket, "shared"); got != chunks {
		t.Errorf("8 concurrent readers made %d range requests, want %d (one per chunk)", got, chunks)
	}
}

func TestRandomReadNearEndDoesNotWaitForWholeObject(t *testing.T) {
	// 32 MiB behind a 4 MiB/s link: the whole object needs at least 8 s.
	wan := emulator.WANProfile{Latency: 10 * time.Millisecond, PerConn: 2 << 20, Total: 4 << 20}
	emu := startEmulator(t, nil)
	const size = 32 << 20
	data := testutil.RandomBytes(size, 5)
	put(t, emu, "big", data)
	m := mount(t, emu, mountOpts{args: []string{"--prefetch-chunk-size", "1MiB", "--prefetch-parallelism", "2"}})
	emu.SetWAN(&wan)

	f, err := os.Open(m.path("big"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	buf := make([]byte, 4096)
	off := int64(size - 10000)
	if _, err := f.ReadAt(buf, off); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	if !bytes.Equal(buf, data[off:off+4096]) {
		t.Fatal("read near the end returned wrong bytes")
	}
	// The shaper makes a full download take >= 8 s; one urgent 1 MiB chunk
	// shares the link with two background ones (~0.75 s).
	if elapsed >= 6*time.Second {
		t.Errorf("a 4 KiB read near the end took %v: it waited for (most of) the whole object", elapsed)
	}
	if got := emu.MediaReads(testBucket, "big"); got >= size>>20 {
		t.Errorf("%d range requests were made by the time the read returned; the whole object was fetched first", got)
	}
	emu.SetWAN(nil)
}

func TestRemountServesCacheWithoutDownloads(t *testing.T) {
	emu := startEmulator(t, nil)
	files := map[string][]byte{
		"one":     testutil.RandomBytes(3<<20+5, 6),
		"d/two":   testutil.RandomBytes(100, 7),
		"d/three": {},
	}
	for n, b := range files {
		put(t, emu, n, b)
	}
	cacheDir := t.TempDir()
	args := []string{"--prefetch-chunk-size", "256KiB"}
	m := mount(t, emu, mountOpts{cacheDir: cacheDir, args: args})
	for n := range files {
		readFile(t, m.path(n))
	}
	m.unmount(t)

	emu.ResetCounters()
	m = mount(t, emu, mountOpts{cacheDir: cacheDir, args: args})
	for n, b := range files {
		if got := readFile(t, m.path(n)); sum(got) != sum(b) {
			t.Errorf("%s after remount: checksum differs", n)
		}
	}
	if got := emu.TotalMediaReads(); got != 0 {
		t.Errorf("after remount, reading cached files made %d range requests, want 0", got)
	}

	// An object changed while unmounted is fetched again, not served
	// stale past the bound: what names.db knows of it is trusted for the
	// TTL since the bucket was asked, then answered once more while it
	// is asked again (stale-while-revalidate), so the new version shows
	// within the TTL plus one refresh; each read is one whole version.
	m.unmount(t)
	changed := testutil.RandomBytes(2000, 8)
	put(t, emu, "one", changed)
	m = mount(t, emu, mountOpts{cacheDir: cacheDir, args: append(args, "--metadata-ttl", "100ms")})
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := readFile(t, m.path("one"))
		if sum(got) == sum(changed) {
			break
		}
		if sum(got) != sum(files["one"]) {
			t.Fatalf("object changed while unmounted: read %d bytes, neither version", len(got))
		}
		if time.Now().After(deadline) {
			t.Fatalf("object changed while unmounted: still the old version 10s after the remount, with a TTL of 100ms")
		}
		time.Sleep(20 * time.Millisecond) // polling for the refresh, with a deadline
	}
}

func TestRemoteOverwriteSeenAfterTTL(t *testing.T) {
	emu := startEmulator(t, nil)
	put(t, emu, "f", []byte("version one"))
	const ttl = time.Second
	m := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", ttl.String()}})
	if got := string(readFile(t, m.path("f"))); got != "version one" {
		t.Fatalf("first read = %q", got)
	}
	// A name looked up before it exists is remembered as missing (the
	// negative cache) and shows up after the TTL too.
	if _, err := os.Stat(m.path("later")); !os.IsNotExist(err) {
		t.Fatalf("stat of a missing name: %v", err)
	}
	put(t, emu, "later", []byte("new"))
	put(t, emu, "f", []byte("version two, longer"))
	changed := time.Now()
	deadline := changed.Add(30 * time.Second)
	for {
		got := string(readFile(t, m.path("f")))
		_, err := os.Stat(m.path("later"))
		if got == "version two, longer" && err == nil {
			break
		}
		if got != "version one" && got != "version two, longer" {
			t.Fatalf("read %q: neither version", got) // the new name may show later than the overwrite
		}
		if time.Now().After(deadline) {
			t.Fatalf("the overwrite (read %q) or the new name (stat: %v) was not seen %v after it, with a TTL of %v", got, err, time.Since(changed), ttl)
		}
		// Poll at a tenth of the TTL: this waits for the TTL to run out,
		// which is the behaviour under test, not a synchronization guess.
		time.Sleep(ttl / 10)
	}
}

func TestEvictionKeepsCacheUnderCap(t *testing.T) {
	emu := startEmulator(t, nil)
	const n, size = 6, 1 << 20
	for i := range n {
		put(t, emu, string(rune('a'+i)), testutil.RandomBytes(size, uint64(10+i)))
	}
	cacheDir := t.TempDir()
	m := mount(t, emu, mountOpts{cacheDir: cacheDir, args: []string{"--cache-max-size", "3MiB", "--prefetch-chunk-size", "256KiB"}})

	// Hold "a" open: it must not be evicted while others come and go.
	held, err := os.Open(m.path("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	buf := make([]byte, size)
	if _, err := held.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		readFile(t, m.path(string(rune('a'+i))))
		if used := diskUsage(t, filepath.Join(cacheDir, "data")); used > 3<<20 {
			t.Fatalf("after reading %d files the cache holds %d bytes, over its 3 MiB cap", i+1, used)
		}
	}
	before := emu.MediaReads(testBucket, "a")
	if _, err := held.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, testutil.RandomBytes(size, 10)) {
		t.Error("the held-open file returned wrong bytes after the others were read")
	}
	if after := emu.MediaReads(testBucket, "a"); after != before {
		t.Errorf("the held-open file was fetched again (%d more requests): it was evicted while open", after-before)
	}
	// The oldest closed files were evicted: reading "b" again downloads it.
	// O_DIRECT, so that the kernel's page cache does not answer for it.
	before = emu.MediaReads(testBucket, "b")
	fd, err := syscall.Open(m.path("b"), syscall.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if _, err := syscall.Pread(fd, buf[:4096], 0); err != nil {
		t.Fatal(err)
	}
	if emu.MediaReads(testBucket, "b") == before {
		t.Error("b was served without a download although the cap forced it out")
	}
}

// diskUsage is the space the files under dir take on disk.
func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// The kernel refuses (EIO) to mix passthrough and page-cache opens of one
// inode, and passthrough opens of two backing files: every mix of opens
// must still work.
func TestOpenModesMix(t *testing.T) {
	emu := startEmulator(t, nil)
	v1 := testutil.RandomBytes(1<<20, 20)
	put(t, emu, "f", v1)
	m := mount(t, emu, mountOpts{args: []string{"--prefetch-chunk-size", "256KiB", "--metadata-ttl", "0"}})

	// A cold open reads through the page cache; reading it all completes
	// the copy, so the next open could use passthrough.
	cold, err := os.Open(m.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(v1))
	if _, err := cold.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if got := readFile(t, m.path("f")); sum(got) != sum(v1) {
			t.Fatalf("open %d while a page-cache handle is open: wrong bytes", i)
		}
	}
	cold.Close()

	// Now a complete copy: held open (passthrough where allowed).
	warm, err := os.Open(m.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer warm.Close()
	// The object changes; a new open sees the new version while the old
	// handle keeps reading the old one.
	v2 := testutil.RandomBytes(700<<10, 21)
	put(t, emu, "f", v2)
	if got := readFile(t, m.path("f")); sum(got) != sum(v2) {
		t.Errorf("open of the new version while the old one is open: %d bytes, wrong", len(got))
	}
	if _, err := warm.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, v1) {
		t.Error("the handle opened before the overwrite no longer reads its version")
	}
}

// A bucket that refuses or fails downloads gives clean errors, never a
// hang, and the mount recovers once the bucket does.
func TestDownloadFailures(t *testing.T) {
	emu := startEmulator(t, nil)
	data := testutil.RandomBytes(1<<20, 30)
	put(t, emu, "f", data)
	put(t, emu, "g", data)
	m := mount(t, emu, mountOpts{args: []string{"--prefetch-chunk-size", "256KiB"}})
	names(t, m.dir) // look the names up while listing still works

	isDownload := func(r *http.Request) bool {
		return strings.HasPrefix(r.URL.Path, "/download/") || r.URL.Query().Get("alt") == "media"
	}
	emu.SetHook(func(r *http.Request) (int, bool) { return 403, isDownload(r) })
	if _, err := os.ReadFile(m.path("f")); !errors.Is(err, syscall.EACCES) {
		t.Errorf("read while downloads are refused (403): %v, want EACCES", err)
	}
	emu.SetHook(nil)
	if got := readFile(t, m.path("f")); sum(got) != sum(data) {
		t.Error("after the bucket recovered, the file reads wrong")
	}

	// The version being read is deleted before it was cached: ESTALE.
	// Downloads are refused while g is opened, so nothing of it is cached.
	emu.SetHook(func(r *http.Request) (int, bool) { return 403, isDownload(r) })
	// g may have been fetched in the background already (and refused by
	// the first hook): only a stop after this open counts below.
	mark := m.logs.mark()
	fd, err := syscall.Open(m.path("g"), syscall.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	// Wait until the refused background download has given up, so that the
	// read below starts its own fetch.
	m.logs.waitForSince(t, mark, `msg="background download stopped" object=g `, time.Minute)
	if err := emu.Delete(testBucket, "g"); err != nil {
		t.Fatal(err)
	}
	emu.SetHook(nil)
	buf := make([]byte, 4096)
	if _, err := syscall.Pread(fd, buf, 0); !errors.Is(err, syscall.ESTALE) {
		t.Errorf("read of a version deleted before it was cached: %v, want ESTALE", err)
	}
}

// Without root, the kernel refuses to register passthrough backing files:
// bucketfs must fall back to serving reads itself, cached or not. A mount
// by an ordinary user is also what fusermount3 (setuid) is for.
func TestUnprivilegedMount(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run the mount as another user")
	}
	const nobody = 65534
	emu := startEmulator(t, nil)
	data := testutil.RandomBytes(1<<20+3, 40)
	put(t, emu, "dir/f", data)

	// /dev/fuse must be open to the user. Some machines (this CI's) ship it
	// 0600: first the clear error that gives, then the mount with the usual
	// 0666. The original mode is restored.
	st, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod("/dev/fuse", st.Mode().Perm()) })
	if err := os.Chmod("/dev/fuse", 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := startMount(t, emu, mountOpts{uid: nobody}); err == nil || !strings.Contains(err.Error(), "cannot open /dev/fuse: permission denied") {
		t.Errorf("mount by a user who cannot open /dev/fuse: %v", err)
	}
	if err := os.Chmod("/dev/fuse", 0o666); err != nil {
		t.Fatal(err)
	}
	m := mount(t, emu, mountOpts{uid: nobody, args: []string{"--prefetch-chunk-size", "256KiB"}})
	// Without allow_other only the mounting user may enter the mount, so
	// the reads run as that user too.
	for round := range 3 { // cold, then cached (passthrough would be used as root)
		cmd := exec.Command("sha256sum", m.path("dir/f"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("round %d: sha256sum as uid %d: %v: %s", round, nobody, err, out)
		}
		if got := strings.Fields(string(out))[0]; got != sum(data) {
			t.Errorf("round %d: checksum %s, want %s", round, got, sum(data))
		}
	}
	// Writes too: without CAP_SYS_ADMIN there is no passthrough, so
	// every write comes to the daemon, the new file's and the cached
	// one's.
	cmd := exec.Command("sh", "-c", `printf 'new file\n' >"$1" && printf 'XY' | dd of="$2" bs=1 seek=10 conv=notrunc status=none`, "sh", m.path("dir/new"), m.path("dir/f"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("writing as uid %d: %v: %s", nobody, err, out)
	}
	m.unmount(t)
	if logs := m.logs.String(); strings.Contains(logs, "level=ERROR") {
		t.Errorf("errors in the log of an unprivileged mount:\n%s", logs)
	}
	if !strings.Contains(m.logs.String(), "FUSE passthrough needs CAP_SYS_ADMIN") {
		t.Error("the unprivileged mount did not say that passthrough is off")
	}
	want := append(bytes.Clone(data[:10]), 'X', 'Y')
	want = append(want, data[12:]...)
	if got := object(t, emu, "dir/f"); !bytes.Equal(got, want) {
		t.Error("the bucket does not hold the cached file as written by the unprivileged user")
	}
	if got := object(t, emu, "dir/new"); string(got) != "new file\n" {
		t.Errorf("the new file holds %q in the bucket", got)
	}
}
