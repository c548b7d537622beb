package integration

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Limits answered with the right errno at once (issue 17, item 4): a size
// past the largest file the mount can hold (GCS's 5 TiB, the cache's
// size, what the cache's disk can ever hold) is EFBIG before anything
// waits for room, as a local disk answers EFBIG past its largest file
// (16 TiB on ext4); negative sizes are EINVAL, from the kernel.

// huge is far past both GCS's object size limit and ext4's largest file.
const huge = 999999999999999

// quick records whether f answered within a few seconds (a wait for
// room would take the cache's --cache-full-wait, 30 s by default).
func (o *obs) quick(what string, f func() error) {
	start := time.Now()
	err := f()
	o.err(what, err)
	o.add("%s answered at once: %v", what, time.Since(start) < 5*time.Second)
}

var limitCases = []posixCase{
	{"limits/truncate-huge", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("x"))
		o.quick("truncate huge", func() error { return unix.Truncate(pj(root, "f"), huge) })
		o.quick("truncate negative", func() error { return unix.Truncate(pj(root, "f"), -1) })
		fd := o.open("open", pj(root, "f"), unix.O_RDWR, 0)
		o.quick("ftruncate huge", func() error { return unix.Ftruncate(fd, huge) })
		o.quick("ftruncate negative", func() error { return unix.Ftruncate(fd, -1) })
		o.quick("fallocate huge", func() error { return unix.Fallocate(fd, 0, 0, huge) })
		o.quick("fallocate negative length", func() error { return unix.Fallocate(fd, 0, 0, -1) })
		o.quick("pwrite at a huge offset", func() error { _, err := unix.Pwrite(fd, []byte("y"), huge); return err })
		o.close("close", fd)
		o.stat("stat", pj(root, "f"))
		o.file("content", pj(root, "f"))
		return o
	}},
}

// TestTruncatePastCacheDisk: with a cache allowed more than its disk can
// ever hold (--cache-max-size 4TiB), a truncation past the disk's size
// is EFBIG at once, not ENOSPC after --cache-full-wait: no upload could
// ever make that room.
func TestTruncatePastCacheDisk(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: []string{"--cache-max-size", "4TiB"}})
	var st unix.Statfs_t
	if err := unix.Statfs(m.cacheDir, &st); err != nil {
		t.Fatal(err)
	}
	disk := int64(st.Blocks) * st.Bsize
	if disk >= 3<<40 {
		t.Skipf("the cache's disk holds %d bytes: more than this test can pass", disk)
	}
	if err := os.WriteFile(m.path("f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := unix.Truncate(m.path("f"), disk+1)
	if err != unix.EFBIG || time.Since(start) > 5*time.Second {
		t.Errorf("truncate to %d bytes (past the cache's disk): %v after %v, want EFBIG at once", disk+1, err, time.Since(start))
	}
	if err := unix.Truncate(m.path("f"), 1<<20); err != nil {
		t.Errorf("truncate to 1 MiB: %v", err)
	}
}

// nameOps are the operations that make or look up a name, each on path
// (the name in question) with existing, a file that exists, as the
// other argument where one is needed.
var nameOps = []struct {
	what string
	do   func(path, existing string) error
}{
	{"stat", func(p, _ string) error { var st unix.Stat_t; return unix.Lstat(p, &st) }},
	{"open", func(p, _ string) error { return openClose(p, unix.O_RDONLY) }},
	{"create", func(p, _ string) error { return openClose(p, unix.O_CREAT|unix.O_WRONLY) }},
	{"mkdir", func(p, _ string) error { return unix.Mkdir(p, 0o755) }},
	{"mkfifo", func(p, _ string) error { return unix.Mkfifo(p, 0o644) }},
	{"symlink", func(p, _ string) error { return unix.Symlink("target", p) }},
	{"link", func(p, e string) error { return unix.Link(e, p) }},
	{"rename to", func(p, e string) error { return unix.Rename(e, p) }},
	{"unlink", func(p, _ string) error { return unix.Unlink(p) }},
	{"rmdir", func(p, _ string) error { return unix.Rmdir(p) }},
	{"chmod", func(p, _ string) error { return unix.Chmod(p, 0o600) }},
	{"readlink", func(p, _ string) error { _, err := os.Readlink(p); return err }},
}

func openClose(path string, flags int) error {
	fd, err := unix.Open(path, flags, 0o644)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// TestNamesTooLong (issue 22, item 5): every operation that makes or
// looks up a name answers ENAMETOOLONG for a name over 255 bytes, as a
// local disk does, and for a name whose object name would pass GCS's
// 1,024 bytes (before: a lookup, so stat, unlink, link and the others
// that start with one, answered ENOENT, and link EPERM). A name of
// exactly 1,024 bytes works.
func TestNamesTooLong(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{})
	root := m.path("")
	local := t.TempDir()
	if err := os.WriteFile(filepath.Join(local, "existing"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Five directories of 200 bytes: their prefix is 1,005 bytes, so
	// that 19 more bytes are exactly GCS's 1,024.
	deep := root
	for i := range 5 {
		deep = filepath.Join(deep, strings.Repeat(strconv.Itoa(i), 200))
		if err := os.Mkdir(deep, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{root, deep} {
		if err := os.WriteFile(filepath.Join(dir, "existing"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct{ what, dir, name string }{
		{"local, 256 bytes", local, strings.Repeat("n", 256)},
		{"mount, 256 bytes", root, strings.Repeat("n", 256)},
		{"mount, object name of 1,025 bytes", deep, strings.Repeat("n", 20)},
	}
	for _, c := range cases {
		for _, op := range nameOps {
			err := op.do(filepath.Join(c.dir, c.name), filepath.Join(c.dir, "existing"))
			if !errors.Is(err, unix.ENAMETOOLONG) {
				t.Errorf("%s: %s: %v, want ENAMETOOLONG", c.what, op.what, errName(err))
			}
		}
	}
	fits := filepath.Join(deep, strings.Repeat("n", 19))
	if err := os.WriteFile(fits, []byte("fits"), 0o644); err != nil {
		t.Fatalf("a file whose object name is 1,024 bytes: %v", err)
	}
	if b := readFile(t, fits); string(b) != "fits" {
		t.Errorf("read back %q", b)
	}
	m.unmount(t)
	if _, err := emu.Object(testBucket, strings.TrimPrefix(fits, root+"/")); err != nil {
		t.Errorf("the 1,024-byte name is not in the bucket: %v", err)
	}
}
