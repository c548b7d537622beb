package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/bucketfs/bucketfs/internal/testutil"
	"golang.org/x/sys/unix"
)

// Names that are not valid UTF-8 cannot be object names: every call that
// would make one answers EINVAL at once (docs/design.md, how names map), not EIO;
// looking one up answers ENOENT without asking the bucket; a symbolic
// link's target that is not UTF-8 is refused too (it is kept as a JSON
// metadata string, where it would silently become U+FFFD). Nothing is
// made, and nothing is logged as an error.
func TestNonUTF8Names(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "0s"}})
	if err := os.WriteFile(m.path("file"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(m.path("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	const bad = "bad\xff\xfename"
	cases := []struct {
		name string
		want syscall.Errno
		call func() error
	}{
		{"stat", unix.ENOENT, func() error { var st unix.Stat_t; return unix.Stat(m.path(bad), &st) }},
		{"open O_CREAT", unix.EINVAL, func() error {
			fd, err := unix.Open(m.path(bad), unix.O_CREAT|unix.O_WRONLY, 0o644)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}},
		{"open O_CREAT in a subdirectory", unix.EINVAL, func() error {
			fd, err := unix.Open(m.path("dir/"+bad), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}},
		{"mkdir", unix.EINVAL, func() error { return unix.Mkdir(m.path(bad), 0o755) }},
		{"rename a file", unix.EINVAL, func() error { return unix.Rename(m.path("file"), m.path(bad)) }},
		{"rename a directory", unix.EINVAL, func() error { return unix.Rename(m.path("dir"), m.path("dir/../"+bad)) }},
		{"symlink", unix.EINVAL, func() error { return unix.Symlink("file", m.path(bad)) }},
		{"symlink to a target not UTF-8", unix.EINVAL, func() error { return unix.Symlink("tar\xffget", m.path("link")) }},
		// The new name is checked first, as for every new name (a valid
		// one gets EPERM: hard links are not supported).
		{"link", unix.EINVAL, func() error { return unix.Link(m.path("file"), m.path(bad)) }},
	}
	for _, c := range cases {
		if err := c.call(); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if got := readFile(t, m.path("file")); string(got) != "kept" {
		t.Errorf("file reads %q after the refused rename", got)
	}
	names, err := os.ReadDir(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 {
		t.Errorf("the mount lists %v, want only file and dir", names)
	}
	m.unmount(t)
	if objs := listObjects(t, emu, ""); strings.Join(objs, " ") != "dir/ file" {
		t.Errorf("the bucket has %q, want dir/ and file", objs)
	}
	if strings.Contains(m.logs.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", m.logs.String())
	}
}

// An object overwritten in the bucket by another client while the mount
// still trusts its old attributes (within --metadata-ttl), and not cached:
// a fresh open and read gives one whole version, old or new, never ESTALE
// or a mix; fstat of the open file gives that version's size. Sizes grow,
// shrink and stay: the kernel knows the old size, and must neither cut the
// new version to it nor pad it. Objects read through the cache, and
// objects too big for it (read from the bucket directly). An object
// deleted meanwhile is ENOENT.
func TestOpenAfterOverwriteWithinTTL(t *testing.T) {
	emu := startEmulator(t, nil)
	cached := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", "10m"}})
	direct := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", "10m", "--cache-max-size", "256KiB"}})
	for _, m := range []*mountProc{cached, direct} {
		for i, sizes := range [][2]int{{300 << 10, 500 << 10}, {500 << 10, 100 << 10}, {64 << 10, 64 << 10}} {
			name := fmt.Sprintf("f%d", i)
			old, cur := testutil.RandomBytes(sizes[0], uint64(i)), testutil.RandomBytes(sizes[1], uint64(100+i))
			put(t, emu, name, old)
			statSize(t, m.path(name), len(old))
			put(t, emu, name, cur)
			got, size := readWithFstat(t, m.path(name))
			switch {
			case bytes.Equal(got, cur) && size == int64(len(cur)):
			case bytes.Equal(got, old) && size == int64(len(old)):
				t.Logf("%s: the old version", m.path(name))
			default:
				t.Errorf("%s: read %d bytes (fstat: %d), neither the old version (%d) nor the new (%d)", m.path(name), len(got), size, len(old), len(cur))
			}
		}
		// Open for writing: nothing is fetched at the open; the first
		// write finds the version gone and goes to the bucket's, and the
		// kernel sees that version's size.
		put(t, emu, "w", []byte("old version"))
		statSize(t, m.path("w"), 11)
		put(t, emu, "w", []byte("the new version"))
		f, err := os.OpenFile(m.path("w"), os.O_RDWR, 0)
		if err != nil {
			t.Fatalf("open for writing after the overwrite: %v", err)
		}
		if _, err := f.WriteAt([]byte("THE"), 0); err != nil {
			t.Fatal(err)
		}
		if st, err := f.Stat(); err != nil || st.Size() != 15 {
			t.Errorf("fstat after the first write: %v, %v; want the new version's 15 bytes", st, err)
		}
		f.Close()
		statSize(t, m.path("w"), 15)
		if got := string(readFile(t, m.path("w"))); got != "THE new version" {
			t.Errorf("written over the new version: %q", got)
		}
		// Deleted by the other client before the first write: that write
		// fails (ESTALE), and nothing reaches the bucket.
		put(t, emu, "wd", []byte("to be deleted"))
		statSize(t, m.path("wd"), 13)
		if err := emu.Delete(testBucket, "wd"); err != nil {
			t.Fatal(err)
		}
		if f, err := os.OpenFile(m.path("wd"), os.O_RDWR, 0); err == nil {
			if _, err := f.WriteAt([]byte("X"), 0); !errors.Is(err, unix.ESTALE) {
				t.Errorf("the first write to a file deleted by another client: %v, want ESTALE", err)
			}
			f.Close()
		} else if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("open for writing of a file deleted by another client: %v", err)
		}

		put(t, emu, "gone", []byte("soon deleted"))
		statSize(t, m.path("gone"), 12)
		if err := emu.Delete(testBucket, "gone"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.ReadFile(m.path("gone")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("open of an object deleted by another client: %v, want ENOENT", err)
		}
	}
}

func statSize(t *testing.T, path string, want int) {
	t.Helper()
	if st, err := os.Stat(path); err != nil || st.Size() != int64(want) {
		t.Fatalf("stat %s: %v, %v; want %d bytes", path, st, err, want)
	}
}

// readWithFstat opens path, reads it whole and returns it with the size
// fstat gave after the read.
func readWithFstat(t *testing.T, path string) ([]byte, int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return b, st.Size()
}
