package integration

import (
	"bytes"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestChownThenDirRename: a file's attribute change (chown, a metadata
// patch: same generation, new metageneration) still on its way to the
// bucket when its directory is renamed. The renamed file is a copy of
// the old object; the copy must find it, and the file must arrive whole
// under its new name with its new owner, cached or not (issue 17, item 6:
// the mount logged that the copy's source had changed, and for a file not
// cached would have dropped it).
func TestChownThenDirRename(t *testing.T) {
	for _, cached := range []bool{true, false} {
		name := "uncached"
		if cached {
			name = "cached"
		}
		for _, when := range []string{"patch-in-flight", "patch-queued", "patch-done"} {
			t.Run(name+"/"+when, func(t *testing.T) { chownThenDirRename(t, cached, when) })
		}
	}
}

func chownThenDirRename(t *testing.T, cached bool, when string) {
	emu := startEmulator(t, nil)
	data := bytes.Repeat([]byte("chown-then-rename "), 1000)
	put(t, emu, "d/f", data)
	put(t, emu, "d/", nil)
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "100ms"}})
	if cached {
		if got := readFile(t, m.path("d/f")); !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes, want %d", len(got), len(data))
		}
	}
	// Hold the patch in the emulator until the rename is made.
	arrived, release := make(chan struct{}), make(chan struct{})
	var once atomic.Bool // set by the first patch (the hooks run on the emulator's goroutines)
	isPatch := func(r *http.Request) bool {
		return r.Method == http.MethodPatch && strings.Contains(r.URL.EscapedPath(), "/o/d%2Ff")
	}
	switch when {
	case "patch-in-flight":
		emu.SetHook(func(r *http.Request) (int, bool) {
			if !isPatch(r) || once.Swap(true) {
				return 0, false
			}
			close(arrived)
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return 0, false
		})
		t.Cleanup(func() { emu.SetHook(nil) })
	case "patch-done":
		emu.SetAfterHook(func(r *http.Request) {
			if isPatch(r) && !once.Swap(true) {
				close(arrived)
			}
		})
		t.Cleanup(func() { emu.SetAfterHook(nil) })
	default:
		close(arrived)
	}
	if err := os.Chown(m.path("d/f"), 1234, 5678); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the metadata patch of the chown was not sent within 30s")
	}
	if err := os.Rename(m.path("d"), m.path("e")); err != nil {
		close(release)
		t.Fatal(err)
	}
	close(release)
	m.unmount(t) // flushes everything
	logs := m.logs.String()
	for _, bad := range []string{"changed in the bucket before the copy", "a renamed file is lost"} {
		if strings.Contains(logs, bad) {
			t.Errorf("the log says %q", bad)
		}
	}
	if got := listObjects(t, emu, ""); strings.Join(got, " ") != "e/ e/f" {
		t.Errorf("the bucket holds %q, want e/ and e/f", got)
	}
	o, err := emu.Object(testBucket, "e/f")
	if err != nil {
		t.Fatalf("e/f: %v", err)
	}
	if !bytes.Equal(o.Content, data) {
		t.Errorf("e/f holds %d bytes, want %d", len(o.Content), len(data))
	}
	if o.Metadata["bucketfs-uid"] != "1234" || o.Metadata["bucketfs-gid"] != "5678" {
		t.Errorf("e/f's owner in the bucket: %v, want 1234:5678", o.Metadata)
	}
}

// TestChangeAfterDirRenameUncached: a file not cached, whose directory is
// renamed (a copy in the bucket), then changed through the inode the
// kernel kept (its name looked up before the rename): a write, or a
// chown. The change is based on the version the copy made, not on
// another: no conflict copy, nothing logged as lost or not applied
// (found by the model tester with issue 17's chown-then-rename-dir).
func TestChangeAfterDirRenameUncached(t *testing.T) {
	for _, change := range []string{"write", "chown"} {
		t.Run(change, func(t *testing.T) {
			emu := startEmulator(t, nil)
			data := bytes.Repeat([]byte("uncached "), 1000)
			put(t, emu, "d/f", data)
			m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "0s", "--metadata-ttl", "1m"}})
			if _, err := os.Stat(m.path("d/f")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(m.path("d"), m.path("e")); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for strings.Join(listObjects(t, emu, ""), " ") != "e/ e/f" {
				if time.Now().After(deadline) {
					t.Fatalf("the rename did not reach the bucket within 30s: %q", listObjects(t, emu, ""))
				}
				time.Sleep(20 * time.Millisecond) // polling the bucket, with a deadline
			}
			want := bytes.Clone(data)
			switch change {
			case "write":
				f, err := os.OpenFile(m.path("e/f"), os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt([]byte("changed"), 10); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
				copy(want[10:], "changed")
			case "chown":
				if err := os.Chown(m.path("e/f"), 1234, 5678); err != nil {
					t.Fatal(err)
				}
			}
			m.unmount(t)
			logs := m.logs.String()
			for _, bad := range []string{"changed in the bucket", "was not applied", "is lost"} {
				if strings.Contains(logs, bad) {
					t.Errorf("the log says %q", bad)
				}
			}
			if got := listObjects(t, emu, ""); strings.Join(got, " ") != "e/ e/f" {
				t.Errorf("the bucket holds %q, want e/ and e/f", got)
			}
			o, err := emu.Object(testBucket, "e/f")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(o.Content, want) {
				t.Errorf("e/f holds other bytes (%d, want %d)", len(o.Content), len(want))
			}
			if change == "chown" && (o.Metadata["bucketfs-uid"] != "1234" || o.Metadata["bucketfs-gid"] != "5678") {
				t.Errorf("e/f's metadata %v, want owner 1234:5678", o.Metadata)
			}
		})
	}
}
