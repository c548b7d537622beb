package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"golang.org/x/sys/unix"
)

// filesUnder returns the files under dir, relative paths to contents, and the
// directories (with a trailing '/').
func filesUnder(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case rel == ".":
		case d.IsDir():
			out[rel+"/"] = nil
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = b
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// bucketTree returns the objects under prefix (names without it) and their
// contents; directory placeholders are left out.
func bucketTree(t testing.TB, emu *emulator.Server, prefix string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, name := range listObjects(t, emu, prefix) {
		if strings.HasSuffix(name, "/") {
			continue
		}
		out[strings.TrimPrefix(name, prefix)] = object(t, emu, name)
	}
	return out
}

func compareFiles(t testing.TB, what string, got, want map[string][]byte) {
	t.Helper()
	var names []string
	for n := range want {
		names = append(names, n)
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		g, gok := got[n]
		w, wok := want[n]
		switch {
		case !gok:
			t.Errorf("%s: %s is missing", what, n)
		case !wok:
			t.Errorf("%s: %s should not be there", what, n)
		case !bytes.Equal(g, w):
			t.Errorf("%s: %s has %d bytes, want %d (or other bytes)", what, n, len(g), len(w))
		}
	}
}

// TestRenameDirectory renames a tree that mixes every state a file can be
// in: in the bucket and never read, cached, written here and not yet
// uploaded, open for writing across the rename, an empty directory, and
// a symbolic link. The mount shows the new tree at once; after the flush
// the bucket has it and nothing of the old one; the objects never read
// were copied in the bucket, not downloaded.
func TestRenameDirectory(t *testing.T) {
	emu := startEmulator(t, nil)
	put(t, emu, "d/untouched", testutil.RandomBytes(300<<10, 1))
	put(t, emu, "d/sub/cached", testutil.RandomBytes(5000, 2))
	put(t, emu, "d/sub/deep/open", testutil.RandomBytes(7000, 3))
	put(t, emu, "d/sub/deep/far", testutil.RandomBytes(100, 4))
	put(t, emu, "d/emptydir/", nil)
	put(t, emu, "other", []byte("outside the directory"))
	cacheDir := t.TempDir()
	m := mount(t, emu, mountOpts{cacheDir: cacheDir, args: []string{"--write-back-delay", "1h"}})

	readFile(t, m.path("d/sub/cached"))
	if err := os.WriteFile(m.path("d/sub/dirty"), []byte("not uploaded yet"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(m.path("d/sub/newdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("deep/far", m.path("d/sub/link")); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(m.path("d/untouched"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	open, err := os.OpenFile(m.path("d/sub/deep/open"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	before := filesUnder(t, m.path("d"))
	emu.ResetCounters()

	if err := os.Rename(m.path("d"), m.path("e")); err != nil {
		t.Fatalf("rename d e: %v", err)
	}
	// Written through a descriptor opened before the rename: the file
	// has its new name now.
	if _, err := open.WriteAt([]byte("after"), 10); err != nil {
		t.Fatal(err)
	}
	if err := open.Close(); err != nil {
		t.Fatal(err)
	}
	want := before
	copy(want["sub/deep/open"][10:], "after")

	if _, err := os.Stat(m.path("d")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat d after the rename: %v, want ENOENT", err)
	}
	compareFiles(t, "the mount after the rename", filesUnder(t, m.path("e")), want)
	if target, err := os.Readlink(m.path("e/sub/link")); err != nil || target != "deep/far" {
		t.Errorf("readlink e/sub/link = %q, %v", target, err)
	}
	if st, err := os.Stat(m.path("e/untouched")); err != nil || !st.ModTime().Equal(mtime) {
		t.Errorf("e/untouched mtime %v (%v), want %v as before the rename", st.ModTime(), err, mtime)
	}
	// New files in the renamed tree land under the new name.
	if err := os.WriteFile(m.path("e/sub/deep/made-after"), []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	want["sub/deep/made-after"] = []byte("new")
	// The old name can be made again, as a new, empty directory.
	if err := os.Mkdir(m.path("d"), 0o755); err != nil {
		t.Fatalf("mkdir d after renaming it away: %v", err)
	}
	if names, err := os.ReadDir(m.path("d")); err != nil || len(names) != 0 {
		t.Errorf("the new d lists %v (%v), want nothing", names, err)
	}
	m.unmount(t)

	if n := emu.MediaReads(testBucket, "d/untouched"); n != 0 {
		t.Errorf("d/untouched was downloaded %d times: a rename should copy it in the bucket", n)
	}
	files := map[string][]byte{}
	for n, b := range want {
		if !strings.HasSuffix(n, "/") && n != "sub/link" {
			files[n] = b
		}
	}
	files["sub/link"] = nil // a symbolic link is an empty object
	compareFiles(t, "the bucket after the flush", bucketTree(t, emu, "e/"), files)
	if left := listObjects(t, emu, "d/"); !slices.Equal(left, []string{"d/"}) {
		t.Errorf("under d/ the bucket holds %q, want only the new directory's placeholder", left)
	}
	for _, dir := range []string{"e/", "e/emptydir/", "e/sub/newdir/"} {
		if object(t, emu, dir) == nil && len(listObjects(t, emu, dir)) == 0 {
			t.Errorf("directory %s is not in the bucket", dir)
		}
	}
	if got := object(t, emu, "other"); string(got) != "outside the directory" {
		t.Errorf("other changed: %q", got)
	}

	// Another mount (a fresh cache) sees the same tree.
	m2 := mount(t, emu, mountOpts{})
	compareFiles(t, "a new mount", filesUnder(t, m2.path("e")), want)
	m2.unmount(t)
}

// TestRenameDirectoryErrors checks the answers of rename(2) for
// directories against what a local file system answers.
func TestRenameDirectoryErrors(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{})
	local := t.TempDir()
	for _, root := range []string{m.dir, local} {
		for _, d := range []string{"a/x", "full/y", "empty"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct{ from, to string }{
		{"a", "full"},      // ENOTEMPTY
		{"a", "file"},      // ENOTDIR
		{"a", "a/x/inner"}, // EINVAL: into itself
		{"nothing", "b"},   // ENOENT
		{"a", "empty"},     // replaces an empty directory
		{"empty", "empty"}, // nothing to do
	}
	for _, c := range cases {
		var errs [2]error
		for i, root := range []string{m.dir, local} {
			// rename(2) itself: os.Rename refuses a directory target
			// before asking the kernel.
			errs[i] = syscall.Rename(filepath.Join(root, c.from), filepath.Join(root, c.to))
		}
		if errnoOf(errs[0]) != errnoOf(errs[1]) {
			t.Errorf("rename %s %s: mount says %v, local directory %v", c.from, c.to, errs[0], errs[1])
		}
	}
	compareFiles(t, "the mount against a local directory", filesUnder(t, m.dir), filesUnder(t, local))
	// RENAME_NOREPLACE onto an existing directory.
	for _, root := range []string{m.dir, local} {
		if err := os.Mkdir(filepath.Join(root, "another"), 0o755); err != nil {
			t.Fatal(err)
		}
		err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(root, "full"), unix.AT_FDCWD, filepath.Join(root, "another"), unix.RENAME_NOREPLACE)
		if !errors.Is(err, syscall.EEXIST) {
			t.Errorf("%s: renameat2 NOREPLACE onto a directory: %v, want EEXIST", root, err)
		}
	}
	m.unmount(t)
}

func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return 0
}

// TestRenameDirectoryCrash renames a tree over and over, writing into it
// and renaming files in it between renames, and kills the mount at a random moment, round after
// round (with uploads, copies and deletions in flight). What was
// acknowledged before each kill is on the mount after the restart, and
// in the bucket after the final flush, under the last name only.
func TestRenameDirectoryCrash(t *testing.T) { renameDirectoryCrash(t, false) }

// TestRenameDirectoryCrashHierarchical is TestRenameDirectoryCrash in a
// bucket with a hierarchical namespace: a tree with nothing left to send
// is renamed by the bucket, any other with copies; no empty folder stays.
func TestRenameDirectoryCrashHierarchical(t *testing.T) { renameDirectoryCrash(t, true) }

func renameDirectoryCrash(t *testing.T, hierarchical bool) {
	rounds := 6
	if os.Getenv("BUCKETFS_LONG") != "" {
		rounds = 60
	}
	emu := startEmulator(t, nil)
	emu.SetHierarchical(testBucket, hierarchical)
	files := map[string][]byte{} // relative to the tree's current name
	for i, n := range []string{"a", "b/c", "b/d/e", "f"} {
		files[n] = testutil.RandomBytes(1000*(i+1), uint64(i))
		put(t, emu, "t0/"+n, files[n])
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 13))
	cacheDir := t.TempDir()
	cur, next := "t0", 1
	for round := range rounds {
		m := mount(t, emu, mountOpts{cacheDir: cacheDir, args: []string{"--write-back-delay", "0"}})
		got := filesUnder(t, m.path(cur))
		for n := range got {
			if strings.HasSuffix(n, "/") {
				delete(got, n)
			}
		}
		compareFiles(t, fmt.Sprintf("round %d: the mount after the restart", round), got, files)
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(200))*time.Millisecond)
		for i := 0; ctx.Err() == nil; i++ {
			if rng.IntN(3) == 0 {
				to := fmt.Sprintf("t%d", next)
				if err := os.Rename(m.path(cur), m.path(to)); err != nil {
					t.Fatalf("round %d: rename %s %s: %v", round, cur, to, err)
				}
				cur, next = to, next+1
				continue
			}
			if rng.IntN(5) == 0 {
				// A file of the tree renamed: after a directory rename,
				// often before its copy is made.
				names := slices.Sorted(maps.Keys(files))
				from := names[rng.IntN(len(names))]
				to := fmt.Sprintf("m%d-%d", round, i)
				if err := os.Rename(m.path(cur+"/"+from), m.path(cur+"/"+to)); err != nil {
					t.Fatalf("round %d: rename %s %s: %v", round, from, to, err)
				}
				files[to] = files[from]
				delete(files, from)
				continue
			}
			name := fmt.Sprintf("b/r%d-%d", round, i)
			data := testutil.RandomBytes(rng.IntN(20000), rng.Uint64())
			if err := os.WriteFile(m.path(cur+"/"+name), data, 0o644); err != nil {
				t.Fatalf("round %d: write %s: %v", round, name, err)
			}
			files[name] = data
		}
		cancel()
		m.crash(t)
	}
	m := mount(t, emu, mountOpts{cacheDir: cacheDir})
	m.unmount(t)
	compareFiles(t, "the bucket", bucketTree(t, emu, cur+"/"), files)
	for _, name := range listObjects(t, emu, "") {
		if !strings.HasPrefix(name, cur+"/") {
			t.Errorf("the bucket still holds %s (the tree is %s now)", name, cur)
		}
	}
	if hierarchical {
		// No folder of an old name is left. (An implicit directory whose
		// files were all renamed away keeps its empty folder under the
		// tree: bucketfs deletes folders when a placeholder goes.)
		for _, f := range emu.Folders(testBucket) {
			if !strings.HasPrefix(f, cur+"/") {
				t.Errorf("the bucket still has folder %s (the tree is %s now)", f, cur)
			}
		}
		t.Logf("%d of the renames made by the bucket's folder rename", emu.FolderRenames())
	}
	if t.Failed() {
		t.Logf("seed %d", seed)
	}
	t.Logf("%d renames over %d rounds, %d files", next-1, rounds, len(files))
}

// TestRenameDirectoryHierarchical: in a bucket with a hierarchical
// namespace, a directory with no local changes is renamed by the bucket
// in one atomic step: no copies, nothing downloaded, the cached files
// keep their bytes. A directory holding a file not yet uploaded is renamed
// with copies, as anywhere; the folders it leaves empty are deleted, as
// are those of removed directories. The bucket's folders are the
// emulator's (internal/emulator/folder.go), written from GCS's
// documentation.
func TestRenameDirectoryHierarchical(t *testing.T) {
	emu := startEmulator(t, nil)
	emu.SetHierarchical(testBucket, true)
	put(t, emu, "d/", nil)
	put(t, emu, "d/cached", testutil.RandomBytes(40<<10, 1))
	put(t, emu, "d/sub/big", testutil.RandomBytes(300<<10, 2))
	put(t, emu, "other", []byte("outside"))
	put(t, emu, "gone/deep/er/file", []byte("removed below"))
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "1h"}})
	if err := os.RemoveAll(m.path("gone")); err != nil {
		t.Fatal(err)
	}
	if names, err := os.ReadDir(m.dir); err != nil || len(names) != 2 {
		t.Fatalf("root lists %v (%v)", names, err) // and remembers the listing
	}
	want := filesUnder(t, m.path("d"))
	emu.ResetCounters()

	if err := os.Rename(m.path("d"), m.path("e")); err != nil {
		t.Fatalf("rename d e: %v", err)
	}
	if n := emu.FolderRenames(); n != 1 {
		t.Fatalf("%d folder renames in the bucket, want 1", n)
	}
	// The bucket has it already, before any flush.
	compareFiles(t, "the bucket right after the rename", bucketTree(t, emu, "e/"), map[string][]byte{
		"cached": want["cached"], "sub/big": want["sub/big"]})
	if left := listObjects(t, emu, "d/"); len(left) != 0 {
		t.Errorf("under d/ the bucket holds %q", left)
	}
	var root []string
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range entries {
		root = append(root, de.Name())
	}
	if !slices.Equal(root, []string{"e", "other"}) {
		t.Errorf("root lists %q after the rename, want e and other", root)
	}
	compareFiles(t, "the mount after the rename", filesUnder(t, m.path("e")), want)
	if n := emu.TotalMediaReads(); n != 0 {
		// Both files were read (cached) before the rename.
		t.Errorf("%d downloads after the rename; the cached files should have kept their bytes", n)
	}

	// A file not yet uploaded: copies.
	if err := os.WriteFile(m.path("e/dirty"), []byte("local"), 0o600); err != nil {
		t.Fatal(err)
	}
	want["dirty"] = []byte("local")
	if err := os.Rename(m.path("e"), m.path("f")); err != nil {
		t.Fatalf("rename e f: %v", err)
	}
	if n := emu.FolderRenames(); n != 1 {
		t.Errorf("%d folder renames, want still 1: e held a local change", n)
	}
	compareFiles(t, "the mount after the second rename", filesUnder(t, m.path("f")), want)
	m.unmount(t)
	files := map[string][]byte{}
	for n, b := range want {
		if !strings.HasSuffix(n, "/") {
			files[n] = b
		}
	}
	compareFiles(t, "the bucket after the flush", bucketTree(t, emu, "f/"), files)
	if left := listObjects(t, emu, "e/"); len(left) != 0 {
		t.Errorf("under e/ the bucket holds %q", left)
	}
	// Folders outlive their objects in such a bucket: the empty ones
	// (the old name of the copied directory, the directories removed)
	// were deleted.
	if got := strings.Join(emu.Folders(testBucket), ","); got != "f/,f/sub/" {
		t.Errorf("folders in the bucket: %s, want f/ and f/sub/", got)
	}
	m2 := mount(t, emu, mountOpts{})
	compareFiles(t, "a new mount", filesUnder(t, m2.path("f")), want)
	m2.unmount(t)
}

// TestFileAtTheOldNameOfARenamedDirectory: a file made at the old name of
// a renamed directory shows, in listings and lookups, once it is in the
// bucket, while the old directory's placeholder is still there (it is
// deleted last; here the bucket refuses its deletion). It vanished from
// listings until the placeholder was gone (found by the model tester).
func TestFileAtTheOldNameOfARenamedDirectory(t *testing.T) {
	emu := startEmulator(t, nil)
	emu.SetHook(func(r *http.Request) (int, bool) {
		refuse := r.Method == http.MethodDelete && strings.HasSuffix(r.URL.EscapedPath(), "/o/d%2F")
		return http.StatusServiceUnavailable, refuse
	})
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "0", "--metadata-ttl", "1m"}})
	if err := os.Mkdir(m.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.path("d/f"), []byte("f"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m.path("d"), m.path("e")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.path("d"), []byte("file d"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Wait until only the placeholder's deletion is left: file d is in
	// the bucket and has left the local changes.
	deadline := time.Now().Add(time.Minute)
	for {
		st := m.status(t)
		if len(st.Dirty) == 1 && st.Dirty[0].Name == "d/" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still dirty after a minute: %+v", st.Dirty)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, bounded above
	}
	if objs := listObjects(t, emu, ""); !slices.Equal(objs, []string{"d", "d/", "e/", "e/f"}) {
		t.Fatalf("the bucket holds %q", objs)
	}
	des, err := os.ReadDir(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, fmt.Sprintf("%s:%v", de.Name(), de.IsDir()))
	}
	if !slices.Equal(names, []string{"d:false", "e:true"}) {
		t.Errorf("the root lists %q, want file d and directory e", names)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(m.path("d"), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		t.Errorf("lstat d: mode %o, %v; want a file", st.Mode, err)
	}
	if got := string(readFile(t, m.path("d"))); got != "file d" {
		t.Errorf("d reads %q", got)
	}
	emu.SetHook(nil) // the placeholder may go now; the unmount waits for it
}
