package integration

import (
	"os"
	"testing"
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
