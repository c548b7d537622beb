package main

import (
	"os"
	"path/filepath"
	"testing"
)

// mountpointPath resolves links in the parent and in the last element
// (absolute and relative), and gives a missing path back as it is, for
// checkMountpoint to report.
func TestMountpointPath(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(dir, "real")
	if err := os.MkdirAll(filepath.Join(real, "mnt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "abs")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real/mnt", filepath.Join(dir, "rel")); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		filepath.Join(dir, "abs", "mnt"): filepath.Join(real, "mnt"),
		filepath.Join(dir, "rel"):        filepath.Join(real, "mnt"),
		filepath.Join(dir, "missing"):    filepath.Join(dir, "missing"),
	} {
		got, err := mountpointPath(in)
		if err != nil || got != want {
			t.Errorf("mountpointPath(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	loop := filepath.Join(dir, "loop")
	if err := os.Symlink("loop", loop); err != nil {
		t.Fatal(err)
	}
	if _, err := mountpointPath(loop); err == nil {
		t.Error("a link to itself resolved")
	}
}
