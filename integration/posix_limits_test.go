package integration

import (
	"os"
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
