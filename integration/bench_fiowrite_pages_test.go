package integration

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"github.com/bucketfs/bucketfs/internal/testutil"
	"golang.org/x/sys/unix"
)

// TestFioWriteJobsStartAlike checks what makes the fio-write section
// compare like with like (bench_fiowrite_test.go): no job lets fio drop
// pages (its drop reaches a native file, not a mount's cache file), and
// before each job the pages of the files it may write are dropped on a
// native target as on a mount. It runs no fio and mounts nothing.
func TestFioWriteJobsStartAlike(t *testing.T) {
	for _, row := range fioWriteRows() {
		for _, direct := range []bool{false, true} {
			if spec := row.spec(direct); !slices.Contains(spec.ioMode, "--invalidate=0") {
				t.Errorf("%s (O_DIRECT %v): fio runs with %q, without --invalidate=0", row.key, direct, spec.ioMode)
			}
		}
	}

	nativeDir, cacheDir := t.TempDir(), t.TempDir()
	native := filepath.Join(nativeDir, "native-write.bin")
	cached := filepath.Join(cacheDir, "data", "1")
	if err := os.MkdirAll(filepath.Dir(cached), 0o755); err != nil {
		t.Fatal(err)
	}
	data := testutil.RandomBytes(4<<20, 33)
	for _, tg := range []writeTarget{
		{label: "native buffered", native: true, dir: nativeDir, exist: native},
		{label: "a mount", dir: t.TempDir(), cacheDir: cacheDir},
	} {
		path := native
		if !tg.native {
			path = cached
		}
		writeSynced(t, path, data) // its pages stay cached
		if n := residentPages(t, path); n == 0 {
			t.Fatalf("%s: no page of %s cached after writing it; the check below would prove nothing", tg.label, path)
		}
		prepareFioWrite(t, tg)
		if n := residentPages(t, path); n > 0 {
			t.Errorf("%s: %d pages of %s still cached when the job would start", tg.label, n, path)
		}
	}
}

// residentPages is how many pages of the file at path are in the page
// cache (mincore(2); x/sys has no wrapper for it).
func residentPages(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		t.Fatalf("mincore %s: %v", path, errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}
