package integration

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bucketfs/bucketfs/internal/testutil"
	"golang.org/x/sys/unix"
)

// A change of extended attributes alone is a metadata patch of the
// object: the bucket keeps the version (same generation, same bytes)
// with the attribute in its custom metadata. A file not yet uploaded
// carries its attributes with its first upload. The names the kernel
// asks about on its own (security.capability before every write) are
// answered without a request to the bucket.
func TestXattrIsMetadataPatch(t *testing.T) {
	emu := startEmulator(t, nil)
	data := testutil.RandomBytes(200000, 3)
	put(t, emu, "f", data)
	put(t, emu, "implicit/x", []byte("x")) // a directory with no placeholder
	gen, err := emu.Generation(testBucket, "f")
	if err != nil {
		t.Fatal(err)
	}
	m := mount(t, emu, mountOpts{})
	if _, err := os.Stat(m.path("f")); err != nil {
		t.Fatal(err)
	}
	emu.ResetCounters()
	buf := make([]byte, 64)
	for _, name := range []string{"security.capability", "security.selinux", "trusted.x", "user.nothing"} {
		if _, err := unix.Getxattr(m.path("f"), name, buf); err != unix.ENODATA {
			t.Errorf("getxattr %s: %v, want ENODATA", name, err)
		}
	}
	if n, err := unix.Listxattr(m.path("f"), buf); err != nil || n != 0 {
		t.Errorf("listxattr: %d, %v; want an empty list", n, err)
	}
	if n := emu.Requests(); n != 0 {
		t.Errorf("the xattr lookups of a known file sent %d requests to the bucket, want none", n)
	}
	if err := unix.Setxattr(m.path("f"), "user.Color", []byte("blue"), 0); err != nil {
		t.Fatalf("setxattr: %v", err)
	}
	if err := os.WriteFile(m.path("new"), []byte("new file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(m.path("new"), "user.k", []byte{0, 1, 2}, 0); err != nil {
		t.Fatalf("setxattr on a new file: %v", err)
	}
	if err := unix.Setxattr(m.path("implicit"), "user.d", []byte("dir"), 0); err != nil {
		t.Fatalf("setxattr on a directory without a placeholder: %v", err)
	}
	m.unmount(t)
	if n := emu.MediaReads(testBucket, "f"); n != 0 {
		t.Errorf("setxattr of a file not cached read its bytes %d times, want none", n)
	}

	o, err := emu.Object(testBucket, "f")
	if err != nil {
		t.Fatal(err)
	}
	if o.Generation != gen || !bytes.Equal(o.Content, data) {
		t.Errorf("after setxattr the bucket has generation %d (%d bytes), want the version put, %d, untouched", o.Generation, len(o.Content), gen)
	}
	if got := o.Metadata["bucketfs-xattr-%43olor"]; got != "t:blue" {
		t.Errorf("the bucket's metadata of f: %v; want bucketfs-xattr-%%43olor=t:blue", o.Metadata)
	}
	n, err := emu.Object(testBucket, "new")
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Metadata["bucketfs-xattr-k"]; got != "b:AAEC" || string(n.Content) != "new file" {
		t.Errorf("the bucket's new: %q, metadata %v; want its bytes and bucketfs-xattr-k=b:AAEC", n.Content, n.Metadata)
	}
	if ph, err := emu.Object(testBucket, "implicit/"); err != nil || ph.Metadata["bucketfs-xattr-d"] != "t:dir" {
		t.Errorf("the placeholder made for the attribute of implicit/: %v (err %v); want bucketfs-xattr-d=t:dir", ph.Metadata, err)
	}

	// Removed, then seen by a mount with a new cache: gone, and still the
	// same version.
	m = mount(t, emu, mountOpts{})
	if err := unix.Removexattr(m.path("f"), "user.Color"); err != nil {
		t.Fatalf("removexattr: %v", err)
	}
	m.unmount(t)
	m = mount(t, emu, mountOpts{})
	if _, err := unix.Getxattr(m.path("f"), "user.Color", buf); err != unix.ENODATA {
		t.Errorf("getxattr of a removed attribute after a remount: %v, want ENODATA", err)
	}
	if g, err := emu.Generation(testBucket, "f"); err != nil || g != gen {
		t.Errorf("after removexattr the generation is %d (%v), want %d", g, err, gen)
	}
}

// The programs that copy attributes: rsync -aX, cp --preserve=xattr,
// setfattr and getfattr, into the mount and back out, and after a
// remount with a fresh cache. rsync -a copies special files too.
func TestXattrPrograms(t *testing.T) {
	for _, p := range []string{"rsync", "cp", "setfattr", "getfattr"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s not found (scripts/deps.sh installs it): %v", p, err)
		}
	}
	src := t.TempDir()
	mustRun := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %q: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	if err := os.MkdirAll(filepath.Join(src, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a", "d/b"} {
		if err := os.WriteFile(filepath.Join(src, f), testutil.RandomBytes(5000, 4), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set := func(p, name string, v []byte) {
		t.Helper()
		if err := unix.Setxattr(p, name, v, 0); err != nil {
			t.Fatalf("setxattr %s on %s: %v", name, p, err)
		}
	}
	set(filepath.Join(src, "a"), "user.mime_type", []byte("text/plain"))
	set(filepath.Join(src, "a"), "user.xdg.origin.url", []byte("https://example.com/a"))
	set(filepath.Join(src, "d", "b"), "user.bin", []byte{0, 1, 0xfe, '\n'})
	set(filepath.Join(src, "d"), "user.dir", []byte("on a directory"))
	if err := unix.Mkfifo(filepath.Join(src, "d", "fifo"), 0o640); err != nil {
		t.Fatal(err)
	}

	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{})
	mustRun("rsync", "-aX", src+"/", m.path("rs")+"/")
	if err := os.Mkdir(m.path("cp"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun("cp", "-r", "--preserve=mode,xattr", src+"/a", src+"/d", m.path("cp"))
	mustRun("setfattr", "-n", "user.comment", "-v", "set by setfattr", m.path("rs/a"))
	if got := mustRun("getfattr", "--absolute-names", "--only-values", "-n", "user.comment", m.path("rs/a")); got != "set by setfattr" {
		t.Errorf("getfattr gives %q, want what setfattr set", got)
	}
	mustRun("setfattr", "-x", "user.comment", m.path("rs/a"))

	want := xattrTree(t, src)
	check := func(when string) {
		t.Helper()
		if got := xattrTree(t, m.path("rs")); got != want {
			t.Errorf("%s, rsync -aX's copy has:\n%s\nthe source:\n%s", when, got, want)
		}
		// cp copied a and d (with its fifo, as cp -r makes one).
		if got, w := xattrTree(t, m.path("cp")), xattrTree(t, src); got != w {
			t.Errorf("%s, cp --preserve=xattr's copy has:\n%s\nthe source:\n%s", when, got, w)
		}
		out := t.TempDir()
		mustRun("rsync", "-aX", m.path("rs")+"/", out+"/")
		if got := xattrTree(t, out); got != want {
			t.Errorf("%s, rsync -aX out of the mount gives:\n%s\nthe source:\n%s", when, got, want)
		}
	}
	check("on the mount")
	m.unmount(t)
	m = mount(t, emu, mountOpts{})
	check("after a remount with a fresh cache")
}

// xattrTree describes every name under root with its type and user.*
// attributes, one line each.
func xattrTree(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		x, err := userXattrsOf(p)
		if err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%s %s %s", rel, typeName(d.Type()), x))
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return strings.Join(lines, "\n")
}
