package integration

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Names that are not valid UTF-8 cannot be object names: every call that
// would make one answers EINVAL at once (README, how names map), not EIO;
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
		{"link (hard links are not supported)", unix.EPERM, func() error { return unix.Link(m.path("file"), m.path(bad)) }},
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
