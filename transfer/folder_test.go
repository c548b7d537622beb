package transfer

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
)

// Folder rename is tested against the emulator's folders.rename
// (internal/emulator/folder.go), written from GCS's documentation: no
// emulator here implements the hierarchical namespace, and this machine
// has no GCS account. What is covered: the request and its escaping, the
// polling of the long-running operation, the errors. What is not: how the
// real service behaves beyond its documentation.

func TestRenameFolder(t *testing.T) {
	emu := startEmulator(t)
	emu.SetHierarchical(bucketName, true)
	g := newTestGCS(t, emu)
	ctx := testutil.Ctx(t, time.Minute)
	files := map[string][]byte{
		"a b/":          nil,
		"a b/x":         testutil.Pattern(1000, 1),
		"a b/sub/y%z":   testutil.Pattern(70_000, 2),
		"a bc/stays":    testutil.Pattern(10, 3),
		"other/a b/not": testutil.Pattern(10, 4),
	}
	before := map[string]ObjectAttrs{}
	for name, data := range files {
		put(t, emu, name, data)
		a, err := g.Stat(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		before[name] = a
	}
	// The operation is polled: the first two looks at it fail.
	var looks atomic.Int32
	emu.SetHook(func(r *http.Request) (int, bool) {
		if strings.Contains(r.URL.Path, "/operations/") && looks.Add(1) <= 2 {
			return http.StatusServiceUnavailable, true
		}
		return 0, false
	})
	if err := g.RenameFolder(ctx, "a b/", "new/place/"); err != nil {
		t.Fatalf("RenameFolder: %v", err)
	}
	if looks.Load() < 3 {
		t.Errorf("the operation was looked at %d times; want the failed looks and a good one", looks.Load())
	}
	for name, data := range files {
		moved, ok := strings.CutPrefix(name, "a b/")
		if !ok {
			if _, err := g.Stat(ctx, name); err != nil {
				t.Errorf("%s, outside the folder, is gone: %v", name, err)
			}
			continue
		}
		if _, err := g.Stat(ctx, name); !errors.Is(err, ErrNotExist) {
			t.Errorf("%s after the rename: %v, want ErrNotExist", name, err)
		}
		a, err := g.Stat(ctx, "new/place/"+moved)
		if err != nil {
			t.Fatalf("new/place/%s: %v", moved, err)
		}
		if a.Generation == before[name].Generation {
			t.Errorf("new/place/%s kept generation %d; the emulator gives new ones, as GCS's objects.move does", moved, a.Generation)
		}
		if !SameContent(before[name], a) {
			t.Errorf("new/place/%s: size %d crc %x md5 %x, was %d %x %x", moved, a.Size, a.CRC32C, a.MD5, before[name].Size, before[name].CRC32C, before[name].MD5)
		}
		got, err := readAll(ctx, g, "new/place/"+moved)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("new/place/%s: %d bytes, %v; want %d", moved, len(got), err, len(data))
		}
	}
	if n := emu.FolderRenames(); n != 1 {
		t.Errorf("emulator made %d folder renames, want 1", n)
	}
}

func TestRenameFolderRefused(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	ctx := testutil.Ctx(t, time.Minute)
	put(t, emu, "d/x", []byte("x"))
	put(t, emu, "e/y", []byte("y"))

	// A flat bucket: nothing is sent.
	err := g.RenameFolder(ctx, "d/", "f/")
	if !errors.Is(err, ErrNotSupported) || !errors.Is(err, ErrNotRenamed) {
		t.Fatalf("flat bucket: %v, want ErrNotSupported", err)
	}
	if emu.FolderRenames() != 0 {
		t.Fatal("a flat bucket's folder was renamed")
	}

	// The answer is remembered per client: a new one sees the change.
	emu.SetHierarchical(bucketName, true)
	g = newTestGCS(t, emu)
	for _, c := range []struct{ from, to, why string }{
		{"d/", "e/", "destination exists"},
		{"nothing/", "f/", "no such folder"},
		{"d/", "d/in/", "into itself"},
		{"d", "f/", "not a folder name"},
	} {
		if err := g.RenameFolder(ctx, c.from, c.to); !errors.Is(err, ErrNotRenamed) {
			t.Errorf("%s: %v, want ErrNotRenamed", c.why, err)
		}
	}
	if got, err := readAll(ctx, g, "d/x"); err != nil || string(got) != "x" {
		t.Errorf("d/x after refused renames: %q, %v", got, err)
	}

	// An answer lost on the way: the rename may have happened.
	emu.SetHook(func(r *http.Request) (int, bool) {
		return http.StatusServiceUnavailable, strings.Contains(r.URL.Path, "/folders/")
	})
	err = g.RenameFolder(ctx, "d/", "f/")
	if err == nil || errors.Is(err, ErrNotRenamed) {
		t.Errorf("503: %v, want an error that leaves it unknown", err)
	}
	emu.SetHook(nil)
}

func TestDeleteEmptyFolders(t *testing.T) {
	emu := startEmulator(t)
	emu.SetHierarchical(bucketName, true)
	g := newTestGCS(t, emu)
	ctx := testutil.Ctx(t, time.Minute)
	for _, n := range []string{"a/", "a/b/c/x", "a/b/y", "a/keep/z", "a/b/d/e/f"} {
		put(t, emu, n, []byte(n))
	}
	for _, n := range []string{"a/b/c/x", "a/b/y", "a/b/d/e/f"} {
		if err := g.Delete(ctx, n, 0); err != nil {
			t.Fatal(err)
		}
	}
	want := "a/,a/b/,a/b/c/,a/b/d/,a/b/d/e/,a/keep/"
	if got := strings.Join(emu.Folders(bucketName), ","); got != want {
		t.Fatalf("folders before: %s, want %s (they stay when their objects go)", got, want)
	}
	if err := g.DeleteEmptyFolders(ctx, "a/b/"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(emu.Folders(bucketName), ","); got != "a/,a/keep/" {
		t.Errorf("folders after deleting a/b/: %s, want a/ and a/keep/", got)
	}
	// a/ holds objects: it stays, and so does everything in it.
	if err := g.DeleteEmptyFolders(ctx, "a/"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(emu.Folders(bucketName), ","); got != "a/,a/keep/" {
		t.Errorf("folders after deleting a/: %s, want them all kept", got)
	}
	for _, n := range []string{"a/", "a/keep/z"} {
		if _, err := g.Stat(ctx, n); err != nil {
			t.Errorf("%s: %v; objects are never deleted", n, err)
		}
	}
	// Not there: no error.
	if err := g.DeleteEmptyFolders(ctx, "nothing/"); err != nil {
		t.Errorf("a folder that is not there: %v", err)
	}
}

func TestDeleteEmptyFoldersFlat(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	before := emu.Requests()
	err := g.DeleteEmptyFolders(testutil.Ctx(t, time.Minute), "a/")
	if !errors.Is(err, ErrNotSupported) {
		t.Fatalf("flat bucket: %v, want ErrNotSupported", err)
	}
	if n := emu.Requests() - before; n != 1 {
		t.Errorf("%d requests; want the one that asks whether the bucket is hierarchical", n)
	}
}
