package integration

import (
	"errors"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// objectMeta returns the custom metadata of an object in the emulator.
func objectMeta(t testing.TB, name string, fake *fakestorage.Server) map[string]string {
	t.Helper()
	o, err := fake.GetObject(testBucket, name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return o.Metadata
}

func statOf(t testing.TB, path string) *syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatalf("lstat %s: %v", path, err)
	}
	return &st
}

// setAttrs sets path's mode, its owner to 1234:5678, and its times.
func setAttrs(t testing.TB, path string, mode os.FileMode, mtime time.Time) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatalf("chmod %s: %v", path, err)
	}
	if err := os.Chown(path, 1234, 5678); err != nil {
		t.Fatalf("chown %s: %v", path, err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatalf("utimes %s: %v", path, err)
	}
}

// TestAttributesPersist: chmod, chown and utimes of new and existing
// files are kept in object metadata and read back by a mount with an
// empty cache; a change of attributes alone patches the metadata and does
// not upload the content again.
func TestAttributesPersist(t *testing.T) {
	emu := startEmulator(t, nil)
	put(t, emu, "remote.bin", testutil.RandomBytes(3<<20, 7))
	oldGen, _ := emu.Generation(testBucket, "remote.bin")
	var uploads atomic.Int64
	emu.SetAfterHook(func(r *http.Request) {
		if isUploadReq(r) {
			uploads.Add(1)
		}
	})
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "1h"}})

	mtime := time.Date(2001, 2, 3, 4, 5, 6, 789, time.UTC)
	if err := os.WriteFile(m.path("new.txt"), []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"new.txt", "remote.bin"} {
		setAttrs(t, m.path(name), 0o640, mtime)
	}
	check := func(when string, path string) {
		t.Helper()
		st := statOf(t, path)
		if st.Mode&0o7777 != 0o640 || st.Uid != 1234 || st.Gid != 5678 {
			t.Errorf("%s: %s mode %o uid %d gid %d, want 640 1234 5678", when, path, st.Mode&0o7777, st.Uid, st.Gid)
		}
		if got := time.Unix(st.Mtim.Unix()); !got.Equal(mtime) {
			t.Errorf("%s: %s mtime %v, want %v", when, path, got, mtime)
		}
	}
	check("before the upload", m.path("new.txt"))
	check("before the upload", m.path("remote.bin"))
	// A write after utimes moves the time on, as on a local disk.
	if err := os.WriteFile(m.path("later.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(m.path("later.txt"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(m.path("later.txt"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("y"))
	f.Close()
	if st := statOf(t, m.path("later.txt")); time.Unix(st.Mtim.Unix()).Year() == 2001 {
		t.Error("a write after utimes left the time set by utimes")
	}
	uploadsBefore := uploads.Load()
	m.unmount(t)
	if n := uploads.Load() - uploadsBefore; n != 2 {
		t.Errorf("the flush made %d uploads, want 2 (new.txt and later.txt; remote.bin's metadata is a patch)", n)
	}
	if gen, _ := emu.Generation(testBucket, "remote.bin"); gen != oldGen {
		t.Errorf("remote.bin's generation changed %d -> %d: its content was uploaded again", oldGen, gen)
	}
	md := objectMeta(t, "remote.bin", emu.Fake())
	if md["bucketfs-mode"] != "640" || md["bucketfs-uid"] != "1234" || md["bucketfs-gid"] != "5678" || md["gcsfuse_mtime"] != "2001-02-03T04:05:06.000000789Z" {
		t.Errorf("remote.bin metadata %v", md)
	}

	m2 := mount(t, emu, mountOpts{}) // an empty cache: everything from the bucket
	check("after a remount", m2.path("new.txt"))
	check("after a remount", m2.path("remote.bin"))
	if got := readFile(t, m2.path("remote.bin")); string(got) != string(testutil.RandomBytes(3<<20, 7)) {
		t.Error("remote.bin's content changed")
	}
	// Rewriting the content keeps the attributes.
	if err := os.WriteFile(m2.path("remote.bin"), []byte("rewritten"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m2.path("new.txt"), m2.path("renamed.txt")); err != nil {
		t.Fatal(err)
	}
	m2.unmount(t)
	for _, name := range []string{"remote.bin", "renamed.txt"} {
		if md := objectMeta(t, name, emu.Fake()); md["bucketfs-mode"] != "640" || md["bucketfs-uid"] != "1234" {
			t.Errorf("%s after a rewrite or rename: metadata %v", name, md)
		}
	}
	if md := objectMeta(t, "renamed.txt", emu.Fake()); md["gcsfuse_mtime"] != "2001-02-03T04:05:06.000000789Z" {
		t.Errorf("a rename changed the modification time: %v", md)
	}
}

// TestSymlinks: symbolic links are empty objects with the target in
// gcsfuse_symlink_target (gcsfuse's convention), both ways.
func TestSymlinks(t *testing.T) {
	emu := startEmulator(t, nil)
	// One made by another tool.
	if err := emu.Fake().CreateObjectStreaming(fakestorage.Object{
		ObjectAttrs: fakestorage.ObjectAttrs{BucketName: testBucket, Name: "theirs", Metadata: map[string]string{"gcsfuse_symlink_target": "dir/file"}},
	}.StreamingObject()); err != nil {
		t.Fatal(err)
	}
	put(t, emu, "dir/file", []byte("target content"))
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "1h"}})

	if got, err := os.Readlink(m.path("theirs")); err != nil || got != "dir/file" {
		t.Errorf("readlink of a gcsfuse symlink: %q %v", got, err)
	}
	if got := readFile(t, m.path("theirs")); string(got) != "target content" {
		t.Errorf("reading through the link: %q", got)
	}
	for name, target := range map[string]string{"rel": "dir/file", "abs": "/nonexistent/bucketfs-test/target", "dangling": "no/such"} {
		if err := os.Symlink(target, m.path(name)); err != nil {
			t.Fatalf("symlink %s: %v", name, err)
		}
		if got, err := os.Readlink(m.path(name)); err != nil || got != target {
			t.Errorf("readlink %s: %q %v", name, got, err)
		}
		st := statOf(t, m.path(name))
		if st.Mode&syscall.S_IFMT != syscall.S_IFLNK || st.Size != int64(len(target)) {
			t.Errorf("lstat %s: mode %o size %d", name, st.Mode, st.Size)
		}
	}
	if err := os.Symlink("x", m.path("rel")); !errors.Is(err, os.ErrExist) {
		t.Errorf("symlink over an existing name: %v, want EEXIST", err)
	}
	if _, err := os.Stat(m.path("dangling")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat through a dangling link: %v", err)
	}
	if err := os.Rename(m.path("rel"), m.path("dir/moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m.path("abs")); err != nil {
		t.Fatal(err)
	}
	m.unmount(t)
	if md := objectMeta(t, "dir/moved", emu.Fake()); md["gcsfuse_symlink_target"] != "dir/file" {
		t.Errorf("dir/moved metadata %v", md)
	}
	if b := object(t, emu, "dir/moved"); len(b) != 0 {
		t.Errorf("a symlink object holds %d bytes", len(b))
	}
	if object(t, emu, "abs") != nil || object(t, emu, "rel") != nil {
		t.Error("a removed or renamed link is still in the bucket")
	}
	m2 := mount(t, emu, mountOpts{})
	defer m2.unmount(t)
	if got, err := os.Readlink(m2.path("dir/moved")); err != nil || got != "dir/file" {
		t.Errorf("after a remount: readlink %q %v", got, err)
	}
	ents, err := os.ReadDir(m2.path(""))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == "dangling" && e.Type() != os.ModeSymlink {
			t.Errorf("readdir type of a link: %v", e.Type())
		}
	}
}

// chmod of a file bigger than the whole cache patches the object's
// metadata at once (the cache cannot hold the file to send it later).
func TestChmodOfAFileBiggerThanTheCache(t *testing.T) {
	emu := startEmulator(t, nil)
	put(t, emu, "big.bin", testutil.RandomBytes(3<<20, 9))
	m := mount(t, emu, mountOpts{args: []string{"--cache-max-size", "1MiB"}})
	if err := os.Chmod(m.path("big.bin"), 0o600); err != nil {
		t.Fatalf("chmod: %v", err)
	}
	if st := statOf(t, m.path("big.bin")); st.Mode&0o777 != 0o600 {
		t.Errorf("mode after chmod %o, want 600", st.Mode&0o777)
	}
	m.unmount(t)
	if md := objectMeta(t, "big.bin", emu.Fake()); md["bucketfs-mode"] != "600" {
		t.Errorf("metadata in the bucket %v", md)
	}
}

// TestDirectoryAttributesPersist: chmod, chown and utimes of directories
// are kept in the metadata of their placeholder objects ("dir/"): patched
// on an existing placeholder (not uploaded again), made for a directory
// that exists only through its files, and read back by a mount with an
// empty cache. The root has no object: its changes are accepted.
func TestDirectoryAttributesPersist(t *testing.T) {
	emu := startEmulator(t, nil)
	put(t, emu, "implicit/f", []byte("f"))
	put(t, emu, "placed/", nil)
	put(t, emu, "placed/g", []byte("g"))
	oldGen, _ := emu.Generation(testBucket, "placed/")
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "1h"}})

	mtime := time.Date(2003, 4, 5, 6, 7, 8, 0, time.UTC)
	for _, name := range []string{"implicit", "placed", "."} {
		setAttrs(t, m.path(name), 0o710, mtime)
	}
	check := func(when string, path string) {
		t.Helper()
		st := statOf(t, path)
		if st.Mode&syscall.S_IFMT != syscall.S_IFDIR || st.Mode&0o7777 != 0o710 || st.Uid != 1234 || st.Gid != 5678 {
			t.Errorf("%s: %s mode %o uid %d gid %d, want a directory, 710 1234 5678", when, path, st.Mode, st.Uid, st.Gid)
		}
		if got := time.Unix(st.Mtim.Unix()); !got.Equal(mtime) {
			t.Errorf("%s: %s mtime %v, want %v", when, path, got, mtime)
		}
	}
	check("before the upload", m.path("implicit"))
	check("before the upload", m.path("placed"))
	m.unmount(t)

	if gen, _ := emu.Generation(testBucket, "placed/"); gen != oldGen {
		t.Errorf("placed/ changed generation %d -> %d: it was uploaded again, not patched", oldGen, gen)
	}
	for _, name := range []string{"implicit/", "placed/"} {
		md := objectMeta(t, name, emu.Fake())
		if md["bucketfs-mode"] != "710" || md["bucketfs-uid"] != "1234" || md["bucketfs-gid"] != "5678" || md["gcsfuse_mtime"] != "2003-04-05T06:07:08Z" {
			t.Errorf("%s metadata %v", name, md)
		}
	}
	if got := listObjects(t, emu, ""); len(got) != 4 {
		t.Errorf("the bucket holds %q, want the two files and two placeholders", got)
	}

	m2 := mount(t, emu, mountOpts{}) // an empty cache: everything from the bucket
	check("after a remount", m2.path("implicit"))
	check("after a remount", m2.path("placed"))
	for dir, want := range map[string]string{"implicit": "f", "placed": "g"} {
		des, err := os.ReadDir(m2.path(dir))
		if err != nil || len(des) != 1 || des[0].Name() != want {
			t.Errorf("%s lists %v (%v), want only %s", dir, des, err, want)
		}
	}
}

// TestCtimeMoves: a file's ctime moves with a change of its attributes
// and with a rename, as on a local disk, though its modification time
// (from another tool, 2001) stays; the ctime of a change of attributes
// is kept in the bucket (bucketfs-ctime) and survives a remount.
func TestCtimeMoves(t *testing.T) {
	emu := startEmulator(t, nil)
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, name := range []string{"chmodded", "renamed"} {
		if err := emu.Fake().CreateObjectStreaming(fakestorage.Object{
			ObjectAttrs: fakestorage.ObjectAttrs{BucketName: testBucket, Name: name, Metadata: map[string]string{"gcsfuse_mtime": old.Format(time.RFC3339Nano)}},
			Content:     []byte("content"),
		}.StreamingObject()); err != nil {
			t.Fatal(err)
		}
	}
	cacheDir := t.TempDir()
	m := mount(t, emu, mountOpts{cacheDir: cacheDir, args: []string{"--write-back-delay", "0s"}})
	recent := func(ts syscall.Timespec) bool { return time.Since(time.Unix(ts.Unix())).Abs() < time.Minute }
	for _, name := range []string{"chmodded", "renamed"} {
		if st := statOf(t, m.path(name)); recent(st.Ctim) || !time.Unix(st.Mtim.Unix()).Equal(old) {
			t.Fatalf("%s before: mtime %v ctime %v, want both in 2001", name, time.Unix(st.Mtim.Unix()), time.Unix(st.Ctim.Unix()))
		}
	}
	if err := os.Chmod(m.path("chmodded"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m.path("renamed"), m.path("renamed2")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"chmodded", "renamed2"} {
		st := statOf(t, m.path(name))
		if !recent(st.Ctim) || !time.Unix(st.Mtim.Unix()).Equal(old) {
			t.Errorf("%s after: mtime %v ctime %v, want mtime in 2001, ctime now", name, time.Unix(st.Mtim.Unix()), time.Unix(st.Ctim.Unix()))
		}
	}
	m.unmount(t)
	if objectMeta(t, "chmodded", emu.Fake())["bucketfs-ctime"] == "" {
		t.Error("the chmod's ctime did not reach the bucket")
	}
	m = mount(t, emu, mountOpts{cacheDir: cacheDir})
	if st := statOf(t, m.path("chmodded")); !recent(st.Ctim) {
		t.Errorf("after a remount the chmod's ctime is %v", time.Unix(st.Ctim.Unix()))
	}
	m.unmount(t)
}
