package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/bucketfs/bucketfs/internal/testutil"
)

// TestDamagedCacheNeverUploaded damages a cached copy behind the mount's
// back, as a failing disk or a careless hand would, between two mounts of
// the same cache: cut short, or with a byte flipped. The next mount must
// show the object's size, read the object's bytes, and upload a change
// made to it on top of the object's bytes, never the damage.
func TestDamagedCacheNeverUploaded(t *testing.T) {
	for _, tt := range []struct {
		name      string
		damage    func(path string) error
		readFirst bool
	}{
		{"truncated to 4MiB", func(p string) error { return os.Truncate(p, 4<<20) }, true},
		{"a byte flipped, read then written", testutil.FlipByte(9<<20 + 5), true},
		{"a byte flipped, written without a read", testutil.FlipByte(3<<20 + 1), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			emu := startEmulator(t, nil)
			cacheDir := t.TempDir()
			data := testutil.RandomBytes(10<<20, 77)
			m := mount(t, emu, mountOpts{cacheDir: cacheDir})
			if err := os.WriteFile(m.path("B"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			m.unmount(t)
			if !bytes.Equal(object(t, emu, "B"), data) {
				t.Fatal("B did not reach the bucket")
			}
			if err := tt.damage(onlyDataFile(t, cacheDir)); err != nil {
				t.Fatal(err)
			}

			m = mount(t, emu, mountOpts{cacheDir: cacheDir})
			if st, err := os.Stat(m.path("B")); err != nil || st.Size() != int64(len(data)) {
				t.Fatalf("stat B: %v, %v; want size %d", st, err, len(data))
			}
			if tt.readFirst {
				if got := readFile(t, m.path("B")); !bytes.Equal(got, data) {
					t.Fatalf("B reads %d bytes that are not the object's %d", len(got), len(data))
				}
			}
			f, err := os.OpenFile(m.path("B"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte{'!'}, 100); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			m.unmount(t)
			want := bytes.Clone(data)
			want[100] = '!'
			if got := object(t, emu, "B"); !bytes.Equal(got, want) {
				t.Fatalf("the bucket's B has %d bytes that are not the object with one byte written (%d bytes): the damage was uploaded", len(got), len(want))
			}
		})
	}
}

// onlyDataFile returns the one data file of a cache holding one object.
func onlyDataFile(t *testing.T, cacheDir string) string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(cacheDir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, de := range des {
		if de.Type().IsRegular() && de.Name()[0] != '.' {
			files = append(files, filepath.Join(cacheDir, "data", de.Name()))
		}
	}
	if len(files) != 1 {
		t.Fatalf("want one data file in the cache, found %v", files)
	}
	return files[0]
}
