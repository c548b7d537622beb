package cache

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// The folder rename of a bucket with a hierarchical namespace is the
// emulator's (internal/emulator/folder.go): written from GCS's
// documentation, not checked against the real service.

// newHierarchicalEnv is newEnv with a bucket that has a hierarchical
// namespace.
func newHierarchicalEnv(t *testing.T) *env {
	e := newEnv(t)
	e.emu.SetHierarchical(bucketName, true)
	return e
}

func isFolderRename(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/folders/")
}

// waitSettled waits until name's cached copy is settled: read whole, its
// download detached and its file synced (which ends just after the last
// read). A folder rename leaves a copy with a download running to copies.
func (e *env) waitSettled(c *Cache, name string) {
	e.t.Helper()
	for {
		c.mu.Lock()
		en := c.entries[name]
		ok := en != nil && c.settledCleanLocked(en)
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-e.ctx.Done():
			e.t.Fatalf("%s never settled", name)
		case <-time.After(5 * time.Millisecond): // polling a condition, bounded by e.ctx
		}
	}
}

// TestFolderRenameMovesCachedCopies: in a hierarchical bucket, a directory
// whose files have no local changes is renamed by the bucket in one step.
// Nothing is copied or deleted; a cached file keeps its bytes under the
// new name (nothing downloaded again), also after a restart.
func TestFolderRenameMovesCachedCopies(t *testing.T) {
	e := newHierarchicalEnv(t)
	e.put("d/", nil)
	a := e.put("d/a", pattern(3000, 1))
	e.put("d/sub/b", pattern(5000, 2))
	e.put("dx", []byte("not under d/"))
	c := e.openWB(0)
	e.cacheAll(c, a, pattern(3000, 1))
	e.waitSettled(c, "d/a")
	log := watchCopiesAndDeletes(e)
	if _, err := c.RenameDir(e.ctx, "d/", "e/"); err != nil {
		t.Fatal(err)
	}
	if n := e.emu.FolderRenames(); n != 1 {
		t.Fatalf("%d folder renames, want 1", n)
	}
	if seen := log.list(); len(seen) != 0 {
		t.Errorf("copies and deletions %q; the bucket renamed the folder", seen)
	}
	if _, ok := c.Local("e/a"); ok {
		t.Error("e/a is a local change; the bucket has it")
	}
	if names := entryNames(c); strings.Join(names, ",") != "e/a" {
		t.Errorf("index holds %q, want e/a alone", names)
	}
	for name, want := range map[string][]byte{"e/a": pattern(3000, 1), "e/sub/b": pattern(5000, 2), "e/": nil, "dx": []byte("not under d/")} {
		if !bytes.Equal(e.object(name), want) {
			t.Errorf("%s in the bucket is wrong", name)
		}
	}
	for _, n := range []string{"d/", "d/a", "d/sub/b"} {
		if _, err := e.b.Stat(e.ctx, n); !errors.Is(err, transfer.ErrNotExist) {
			t.Errorf("%s: %v, want gone", n, err)
		}
	}
	na, err := e.b.Stat(e.ctx, "e/a")
	if err != nil {
		t.Fatal(err)
	}
	c.crash()
	e.emu.ResetCounters()
	recs := records(t, e.dir)
	if rec, ok := recs["e/a"]; !ok || rec.Generation != na.Generation {
		t.Errorf("record of e/a after a restart: %+v, %v; want generation %d", rec, ok, na.Generation)
	}
	if _, ok := recs["d/a"]; ok {
		t.Error("d/a still has a record after a restart")
	}
	c2 := e.openWB(0)
	e.cacheAll(c2, na, pattern(3000, 1))
	if n := e.mediaReads("e/a"); n != 0 {
		t.Errorf("e/a was downloaded %d times; its cached copy should have moved", n)
	}
}

// TestFolderRenameLocalChangesCopy: a directory holding a file not yet
// uploaded is renamed with copies, as in any bucket.
func TestFolderRenameLocalChangesCopy(t *testing.T) {
	e := newHierarchicalEnv(t)
	e.put("d/a", pattern(3000, 3))
	c := e.openWB(time.Hour)
	e.write(c, transfer.ObjectAttrs{Name: "d/new"}, true, 0, []byte("dirty"))
	log := watchCopiesAndDeletes(e)
	if _, err := c.RenameDir(e.ctx, "d/", "e/"); err != nil {
		t.Fatal(err)
	}
	e.flush(c)
	if n := e.emu.FolderRenames(); n != 0 {
		t.Errorf("%d folder renames; a local change must make copies", n)
	}
	if log.index("copy e/a") < 0 {
		t.Errorf("requests %q, want a copy of e/a", log.list())
	}
	if !bytes.Equal(e.object("e/a"), pattern(3000, 3)) || string(e.object("e/new")) != "dirty" {
		t.Error("the new names do not hold the files")
	}
}

// TestFolderRenameFreezesNames: names under the directory wait while the
// bucket renames it, so nothing reads the old objects as they move or
// changes what was checked.
func TestFolderRenameFreezesNames(t *testing.T) {
	e := newHierarchicalEnv(t)
	b := e.put("d/b", pattern(2000, 4))
	c := e.openWB(0)
	arrived, release := make(chan struct{}), make(chan struct{})
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		if isFolderRename(r) {
			close(arrived)
			<-release
		}
		return 0, false
	})
	renamed := make(chan error, 1)
	go func() {
		_, err := c.RenameDir(e.ctx, "d/", "e/")
		renamed <- err
	}()
	<-arrived
	opened := make(chan error, 1)
	go func() {
		h, err := c.Open(e.ctx, b)
		if err == nil {
			_, err = readAll(e.ctx, h)
			h.Close()
		}
		opened <- err
	}()
	// Let the rename go once the open waits for it.
	c.mu.Lock()
	for c.waiters == 0 {
		wake := c.waited
		c.mu.Unlock()
		select {
		case <-wake:
		case <-e.ctx.Done():
			t.Fatal("the open never waited for the rename")
		}
		c.mu.Lock()
	}
	c.mu.Unlock()
	early := e.mediaReads("d/b") // none while the open waits
	close(release)
	if err := <-renamed; err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err == nil {
		t.Error("reading d/b after its folder was renamed worked; the object is gone")
	}
	// After the rename the open's download may ask for the gone object
	// more than once (its chunk, and the read waiting for it).
	if early != 0 {
		t.Errorf("d/b was read %d times before the folder rename ended", early)
	}
	if !bytes.Equal(e.object("e/b"), pattern(2000, 4)) {
		t.Error("e/b is wrong")
	}
}

// TestFolderRenameAnswerLost: if the bucket's answer is lost, the rename
// fails and the cached copies under the old name go (the bucket may have
// moved them); a refusal instead falls back to copies.
func TestFolderRenameAnswerLost(t *testing.T) {
	e := newHierarchicalEnv(t)
	a := e.put("d/a", pattern(1000, 5))
	c := e.openWB(0)
	e.cacheAll(c, a, pattern(1000, 5))
	e.waitSettled(c, "d/a")
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		return http.StatusServiceUnavailable, isFolderRename(r)
	})
	_, err := c.RenameDir(e.ctx, "d/", "e/")
	if err == nil {
		t.Fatal("the rename worked with its answer lost")
	}
	if names := entryNames(c); len(names) != 0 {
		t.Errorf("index holds %q after a rename of unknown outcome, want nothing", names)
	}
	if c.Stats().DirtyFiles != 0 {
		t.Error("a failed folder rename left local changes")
	}

	e.emu.SetHook(func(r *http.Request) (int, bool) {
		return http.StatusForbidden, isFolderRename(r)
	})
	if _, err := c.RenameDir(e.ctx, "d/", "e/"); err != nil {
		t.Fatalf("refused folder rename: %v; want copies instead", err)
	}
	e.flush(c)
	if !bytes.Equal(e.object("e/a"), pattern(1000, 5)) {
		t.Error("e/a is wrong")
	}
	if _, err := e.b.Stat(e.ctx, "d/a"); !errors.Is(err, transfer.ErrNotExist) {
		t.Errorf("d/a: %v, want gone", err)
	}
}

// TestEmptyFoldersDeleted: in a hierarchical bucket, folders stay when
// their objects go; the cache deletes them once a directory's placeholder
// is deleted (rmdir), and after a directory rename made with copies,
// before the flush returns.
func TestEmptyFoldersDeleted(t *testing.T) {
	e := newHierarchicalEnv(t)
	x := e.put("d/sub/x", []byte("x"))
	p := e.put("d/", nil)
	e.put("r/a", []byte("a"))
	e.put("keep/y", []byte("y"))
	c := e.openWB(0)
	for _, rm := range []struct {
		name string
		gen  int64
	}{{"d/sub/x", x.Generation}, {"d/sub/", -1}, {"d/", p.Generation}} {
		if err := c.Remove(e.ctx, rm.name, rm.gen); err != nil {
			t.Fatal(err)
		}
	}
	e.write(c, transfer.ObjectAttrs{Name: "r/new"}, true, 0, []byte("local")) // renamed with copies
	if _, err := c.RenameDir(e.ctx, "r/", "s/"); err != nil {
		t.Fatal(err)
	}
	e.flush(c)
	c.Close() // as at unmount: the flush must have waited for the folders too
	if got := strings.Join(e.emu.Folders(bucketName), ","); got != "keep/,s/" {
		t.Errorf("folders after the flush: %s, want keep/ and s/", got)
	}
}
