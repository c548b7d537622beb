package integration

import (
	"bytes"
	"os"
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
	m.unmount(t)

	o, err := emu.Fake().GetObject(testBucket, "f")
	if err != nil {
		t.Fatal(err)
	}
	if o.Generation != gen || !bytes.Equal(o.Content, data) {
		t.Errorf("after setxattr the bucket has generation %d (%d bytes), want the version put, %d, untouched", o.Generation, len(o.Content), gen)
	}
	if got := o.Metadata["bucketfs-xattr-%43olor"]; got != "t:blue" {
		t.Errorf("the bucket's metadata of f: %v; want bucketfs-xattr-%%43olor=t:blue", o.Metadata)
	}
	n, err := emu.Fake().GetObject(testBucket, "new")
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Metadata["bucketfs-xattr-k"]; got != "b:AAEC" || string(n.Content) != "new file" {
		t.Errorf("the bucket's new: %q, metadata %v; want its bytes and bucketfs-xattr-k=b:AAEC", n.Content, n.Metadata)
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
