package integration

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
)

// A damaged cache disk never costs a change that was acknowledged: the
// mount is killed with changes not yet uploaded (a long write-back
// delay), index.db is deleted or overwritten with garbage, and a remount
// serves every change and uploads it.
func TestDamagedCacheIndexKeepsChanges(t *testing.T) {
	damage := map[string]func(t *testing.T, index string){
		"deleted": func(t *testing.T, index string) {
			if err := os.Remove(index); err != nil {
				t.Fatal(err)
			}
		},
		"corrupted": func(t *testing.T, index string) {
			st, err := os.Stat(index)
			if err != nil {
				t.Fatal(err)
			}
			junk := make([]byte, st.Size())
			rand.Read(junk)
			if err := os.WriteFile(index, junk, 0o600); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			emu := startEmulator(t, nil)
			put(t, emu, "existing", []byte("the bucket's version"))
			put(t, emu, "doomed", []byte("to be deleted"))
			cacheDir := t.TempDir()
			m := mount(t, emu, mountOpts{cacheDir: cacheDir, args: []string{"--write-back-delay", "1h"}})
			want := map[string][]byte{
				"new":       testutil.RandomBytes(300<<10, 1),
				"dir/inner": testutil.RandomBytes(5000, 2),
				"existing":  testutil.RandomBytes(70<<10, 3),
				"renamed":   testutil.RandomBytes(1234, 4),
			}
			for _, n := range []string{"new", "existing", "renamed"} {
				if err := os.WriteFile(m.path(n), want[n], 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Mkdir(m.path("dir"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(m.path("dir/inner"), want["dir/inner"], 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(m.path("renamed"), m.path("moved")); err != nil {
				t.Fatal(err)
			}
			want["moved"] = want["renamed"]
			delete(want, "renamed")
			if err := os.Remove(m.path("doomed")); err != nil {
				t.Fatal(err)
			}
			// Every change in index.db, none left only in the journal: the
			// index alone knew them.
			waitEmptyJournal(t, cacheDir)
			m.crash(t)
			if got := object(t, emu, "new"); got != nil {
				t.Fatal("new reached the bucket before the crash: the test shows nothing")
			}
			fn(t, filepath.Join(cacheDir, "index.db"))

			code, out := runBucketfs(t, nil, "fsck", "--cache-dir", cacheDir)
			t.Logf("fsck (exit %d):\n%s", code, out)
			if name == "corrupted" && (code != 1 || !strings.Contains(out, "DAMAGED")) {
				t.Errorf("fsck of a corrupted index: exit %d, want 1 and DAMAGED", code)
			}
			if name == "deleted" && (code != 0 || !strings.Contains(out, "missing")) {
				t.Errorf("fsck of a deleted index: exit %d, want 0 and missing", code)
			}

			m2 := mount(t, emu, mountOpts{cacheDir: cacheDir, args: []string{"--write-back-delay", "1h"}})
			for n, data := range want {
				if got := readFile(t, m2.path(n)); !bytes.Equal(got, data) {
					t.Errorf("%s through the remount: %d bytes, want the %d written", n, len(got), len(data))
				}
			}
			for _, n := range []string{"doomed", "renamed"} {
				if _, err := os.Stat(m2.path(n)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s through the remount: %v, want it gone", n, err)
				}
			}
			if code, out := runBucketfs(t, nil, "fsck", "--cache-dir", cacheDir); code != 1 || !strings.Contains(out, "unmount it first") {
				t.Errorf("fsck of a mounted cache: exit %d, %s", code, out)
			}
			if name == "corrupted" {
				aside, _ := filepath.Glob(filepath.Join(cacheDir, "index.db.corrupt-*"))
				if len(aside) != 1 {
					t.Errorf("index.db.corrupt-* = %v, want the damaged index moved aside", aside)
				}
			}
			m2.unmount(t)
			for n, data := range want {
				if got := object(t, emu, n); !bytes.Equal(got, data) {
					t.Errorf("%s in the bucket: %d bytes, want the %d written", n, len(got), len(data))
				}
			}
			for _, n := range []string{"doomed", "renamed"} {
				if object(t, emu, n) != nil {
					t.Errorf("%s is in the bucket, want it deleted", n)
				}
			}
			if _, err := os.Stat(filepath.Join(cacheDir, "lost+found")); err == nil {
				t.Errorf("lost+found was made; nothing should need it")
			}
		})
	}
}

// waitEmptyJournal waits until the mount has applied its journal to
// index.db (it does every second).
func waitEmptyJournal(t *testing.T, cacheDir string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := os.Stat(filepath.Join(cacheDir, "journal"))
		if err == nil && st.Size() == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache journal was not applied within 30s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
