package integration

import (
	"errors"
	"io"
	"net/http"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// A file overwritten (made longer or shorter) by another client while the
// mount trusts its old size (within --metadata-ttl), then opened here with
// O_APPEND: the write goes at the end of the version the bucket has,
// which the lazy handle's first write takes (lazywrite.go, rebase). The
// kernel computed the append's offset from the old size: written there,
// the bytes landed in the middle of the new version (or past its end,
// after a hole).
func TestAppendAfterOverwriteWithinTTL(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", "10m"}})
	for _, c := range []struct{ name, old, cur string }{
		{"longer", "old version", "the new version, longer"},
		{"shorter", "the old version, longer", "new version"},
	} {
		put(t, emu, c.name, []byte(c.old))
		statSize(t, m.path(c.name), len(c.old))
		put(t, emu, c.name, []byte(c.cur))
		f, err := os.OpenFile(m.path(c.name), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatalf("open for appending after the overwrite: %v", err)
		}
		if _, err := f.Write([]byte("+appended")); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if got, want := string(readFile(t, m.path(c.name))), c.cur+"+appended"; got != want {
			t.Errorf("%s: appended to the new version: %q; want %q", c.name, got, want)
		}
	}
}

// The first write through a lazy handle finds its version gone (replaced
// after the open) and asks the bucket for the live one: if the bucket refuses that request, the
// write fails with the bucket's error (EACCES here), not ESTALE, which
// would tell the application the file is gone.
func TestLazyWriteRebaseErrorIsTheBuckets(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", "10m"}})
	put(t, emu, "w", []byte("old version"))
	statSize(t, m.path("w"), 11)
	f, err := os.OpenFile(m.path("w"), os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open for writing: %v", err)
	}
	defer f.Close()
	put(t, emu, "w", []byte("new version")) // between the open and the first write
	emu.SetHook(func(r *http.Request) (int, bool) {
		// The metadata request of w, not its download.
		if r.Method == http.MethodGet && r.URL.Path == "/storage/v1/b/"+testBucket+"/o/w" && r.URL.Query().Get("alt") != "media" {
			return http.StatusForbidden, true
		}
		return 0, false
	})
	t.Cleanup(func() { emu.SetHook(nil) })
	if _, err := f.WriteAt([]byte("THE"), 0); !errors.Is(err, unix.EACCES) {
		t.Errorf("the first write, the bucket refusing the metadata request: %v; want EACCES", err)
	}
}

// The same without O_APPEND: a program that opens for writing and seeks
// to the end (or takes the size from fstat) gets the end the kernel
// knows. A version replaced since the lookup, of another size, must be
// found at the open (ESTALE there: the kernel opens the new version, with
// its size, as a new inode), not at the first write, which lands where
// the program put it: in the middle of the new version, or past its end.
func TestSeekEndWriteAfterOverwriteWithinTTL(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", "10m"}})
	for _, c := range []struct{ name, old, cur string }{
		{"longer", "old version", "the new version, longer"},
		{"shorter", "the old version, longer", "new version"},
	} {
		put(t, emu, c.name, []byte(c.old))
		statSize(t, m.path(c.name), len(c.old))
		put(t, emu, c.name, []byte(c.cur))
		f, err := os.OpenFile(m.path(c.name), os.O_RDWR, 0)
		if err != nil {
			t.Fatalf("open for writing after the overwrite: %v", err)
		}
		off, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("+added")); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if got, want := string(readFile(t, m.path(c.name))), c.cur+"+added"; got != want {
			t.Errorf("%s: written at the end (offset %d) of the new version: %q; want %q", c.name, off, got, want)
		}
	}
}

// A version replaced between a lazy open and its first write by one of
// another size: the write fails (ESTALE) and nothing of it reaches the
// bucket; the kernel placed it by the old size, and on the new version it
// would land in the wrong place.
func TestLazyWriteAfterResizeBetweenOpenAndWrite(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", "10m"}})
	put(t, emu, "r", []byte("old version"))
	statSize(t, m.path("r"), 11)
	f, err := os.OpenFile(m.path("r"), os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open for writing: %v", err)
	}
	defer f.Close()
	put(t, emu, "r", []byte("the new version, longer"))
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("+x")); !errors.Is(err, unix.ESTALE) {
		t.Errorf("the first write after a resize by another client: %v; want ESTALE", err)
	}
	f.Close()
	m.unmount(t)
	if o, err := emu.Object(testBucket, "r"); err != nil || string(o.Content) != "the new version, longer" {
		t.Errorf("the object after the failed write: %q, %v; want the other client's version", o.Content, err)
	}
}
