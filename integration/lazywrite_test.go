package integration

import (
	"errors"
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

// The first write through a lazy handle finds its version gone and asks
// the bucket for the live one: if the bucket refuses that request, the
// write fails with the bucket's error (EACCES here), not ESTALE, which
// would tell the application the file is gone.
func TestLazyWriteRebaseErrorIsTheBuckets(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", "10m"}})
	put(t, emu, "w", []byte("old version"))
	statSize(t, m.path("w"), 11)
	put(t, emu, "w", []byte("the new version"))
	f, err := os.OpenFile(m.path("w"), os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open for writing after the overwrite: %v", err)
	}
	defer f.Close()
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
