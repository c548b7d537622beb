package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Conflict copies of long names (issue 22, item 3): a file name of 221
// to 255 bytes, and a path near GCS's 1024-byte limit, get copies whose
// names fit both limits. Before, the first copy was listed but answered
// ENAMETOOLONG to stat, cat and rm (and a fresh mount hid it), and the
// second was refused by the bucket (400) and retried forever: the
// unmount's flush never ended.
func TestConflictCopyOfLongNames(t *testing.T) {
	emu := startEmulator(t, nil)
	long := strings.Repeat("l", 240) + ".txt" // 244 bytes
	var deep strings.Builder
	for range 9 {
		deep.WriteString(strings.Repeat("d", 99) + "/")
	}
	deepDir := strings.TrimSuffix(deep.String(), "/")
	deepName := deep.String() + strings.Repeat("f", 100) // 1000 bytes
	for _, n := range []string{long, deepName} {
		put(t, emu, n, []byte("base"))
	}
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "1h"}})
	for _, n := range []string{long, deepName} {
		if err := os.WriteFile(m.path(n), []byte("mine"), 0o644); err != nil {
			t.Fatalf("write %d-byte name: %v", len(n), err)
		}
		put(t, emu, n, []byte("theirs")) // another writer, meanwhile
	}
	m.unmount(t) // the flush ends: nothing is refused
	var copies []string
	for _, o := range listObjects(t, emu, "") {
		if strings.Contains(o, ".bucketfs-conflict-") {
			copies = append(copies, o)
		}
	}
	if len(copies) != 2 {
		t.Fatalf("conflict copies %q, want two", copies)
	}
	m2 := mount(t, emu, mountOpts{})
	for _, c := range copies {
		seg := filepath.Base(c)
		if len(seg) > 255 || len(c) > 1024 {
			t.Errorf("copy %q: %d-byte file name, %d bytes in all", c, len(seg), len(c))
		}
		if got := object(t, emu, c); !bytes.Equal(got, []byte("mine")) {
			t.Errorf("copy %q holds %q, want the local version", c, got)
		}
		dir := filepath.Dir(c)
		if dir != "." && dir != deepDir {
			t.Errorf("copy %q is not beside its file", c)
		}
		ents, err := os.ReadDir(m2.path(dir))
		listed := false
		for _, e := range ents {
			listed = listed || e.Name() == seg
		}
		if err != nil || !listed {
			t.Errorf("copy %q is not listed by a fresh mount (%v)", c, err)
		}
		if got, err := os.ReadFile(m2.path(c)); err != nil || string(got) != "mine" {
			t.Errorf("cat of copy %q: %q, %v", c, got, err)
		}
		if err := os.Remove(m2.path(c)); err != nil {
			t.Errorf("rm of copy %q: %v", c, err)
		}
	}
	for _, n := range []string{long, deepName} {
		if got := string(object(t, emu, n)); got != "theirs" {
			t.Errorf("%d-byte name holds %q, want the other writer's version", len(n), got)
		}
	}
	m2.unmount(t)
	for _, c := range copies {
		if object(t, emu, c) != nil {
			t.Errorf("copy %q is still in the bucket after rm", c)
		}
	}
}
