package cache

import (
	"bytes"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// requestLog records the copies and deletions the emulator saw, in order,
// as "copy DST" and "delete NAME".
type requestLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *requestLog) add(s string) {
	l.mu.Lock()
	l.seen = append(l.seen, s)
	l.mu.Unlock()
}

func (l *requestLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// index returns where s is in the log (-1: not there).
func (l *requestLog) index(s string) int { return slices.Index(l.list(), s) }

// watchCopiesAndDeletes logs the copies and deletions the emulator of e
// answers from now on.
func watchCopiesAndDeletes(e *env) *requestLog {
	log := &requestLog{}
	e.emu.SetAfterHook(func(r *http.Request) {
		switch {
		case r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/rewriteTo/"):
			log.add("copy " + objectOf(r))
		case r.Method == http.MethodDelete:
			log.add("delete " + objectOf(r))
		}
	})
	return log
}

func objectOf(r *http.Request) string {
	p := r.URL.Path
	if _, dst, ok := strings.Cut(p, "/rewriteTo/b/"); ok {
		_, o, _ := strings.Cut(dst, "/o/")
		return o
	}
	_, o, _ := strings.Cut(p, "/o/")
	return o
}

// TestRenameDirCopiesBeforeDeleting renames a directory whose objects
// were never read: the bucket copies them (nothing is downloaded), and
// no old name is deleted before its copy is made, even when copies fail
// for a while.
func TestRenameDirCopiesBeforeDeleting(t *testing.T) {
	e := newEnv(t)
	e.put("d/a", pattern(3000, 1))
	e.put("d/sub/b", pattern(5000, 2))
	e.put("dx", []byte("not under d/"))
	log := watchCopiesAndDeletes(e)
	var failed sync.Map
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/rewriteTo/") {
			// Each copy fails twice first.
			n, _ := failed.LoadOrStore(objectOf(r), new(int))
			if *n.(*int) < 2 {
				*n.(*int)++
				return http.StatusServiceUnavailable, true
			}
		}
		return 0, false
	})
	c := e.openWB(0)
	if _, err := c.RenameDir(e.ctx, "d/", "e/"); err != nil {
		t.Fatal(err)
	}
	if a, ok := c.Local("e/sub/b"); !ok || a.Size != 5000 {
		t.Errorf("Local(e/sub/b) = %+v, %v; want a local change of 5000 bytes", a, ok)
	}
	if _, removed := c.LocalNames("d/"); !slices.Contains(removed, "d/a") || !slices.Contains(removed, "d/") {
		t.Errorf("removed under d/: %q, want d/a and the placeholder d/", removed)
	}
	e.flush(c)
	for _, n := range []string{"a", "sub/b"} {
		copied, deleted := log.index("copy e/"+n), log.index("delete d/"+n)
		if copied < 0 || deleted < 0 || deleted < copied {
			t.Errorf("%s: copied at %d, deleted at %d in %q; want the copy first", n, copied, deleted, log.list())
		}
	}
	if !bytes.Equal(e.object("e/a"), pattern(3000, 1)) || !bytes.Equal(e.object("e/sub/b"), pattern(5000, 2)) {
		t.Error("the new names do not hold the old contents")
	}
	for _, n := range []string{"d/a", "d/sub/b"} {
		if _, err := e.b.Stat(e.ctx, n); !errors.Is(err, transfer.ErrNotExist) {
			t.Errorf("%s after the flush: %v, want gone", n, err)
		}
	}
	if string(e.object("dx")) != "not under d/" {
		t.Error("dx changed")
	}
	if n := e.mediaReads("d/a") + e.mediaReads("d/sub/b"); n != 0 {
		t.Errorf("%d downloads: a directory rename should copy in the bucket", n)
	}
}

// TestRenameDirSurvivesCrash: after a crash right after the rename, the
// reopened cache still shows the new names, reads them (from the old
// objects, which are held), and sends the copies and deletions.
func TestRenameDirSurvivesCrash(t *testing.T) {
	e := newEnv(t)
	e.put("d/a", pattern(4000, 3))
	b := e.put("d/b", pattern(2000, 4))
	c := e.openWB(time.Hour)
	h := e.openHandle(c, b)
	e.mustReadAll(h, pattern(2000, 4))
	h.Close() // cached: its bytes move along
	e.write(c, transfer.ObjectAttrs{Name: "d/new"}, true, 0, []byte("dirty"))
	if _, err := c.RenameDir(e.ctx, "d/", "e/"); err != nil {
		t.Fatal(err)
	}
	c.crash()

	// Nothing reaches the bucket until the new names have been read.
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		if r.Method != http.MethodGet {
			return http.StatusServiceUnavailable, true
		}
		return 0, false
	})
	c2 := e.openWB(time.Hour)
	e.mustHaveLocal(c2, map[string][]byte{"e/a": pattern(4000, 3), "e/b": pattern(2000, 4), "e/new": []byte("dirty")})
	e.emu.SetHook(nil)
	e.flush(c2)
	for name, want := range map[string][]byte{"e/a": pattern(4000, 3), "e/b": pattern(2000, 4), "e/new": []byte("dirty")} {
		if !bytes.Equal(e.object(name), want) {
			t.Errorf("%s in the bucket is wrong", name)
		}
	}
	for _, n := range []string{"d/a", "d/b", "d/new"} {
		if _, err := e.b.Stat(e.ctx, n); !errors.Is(err, transfer.ErrNotExist) {
			t.Errorf("%s after the flush: %v, want gone", n, err)
		}
	}
}

// TestRenameDirSourceChangedElsewhere: someone else deletes an old object
// before its copy is made. A cached complete copy is uploaded instead; an
// uncached one is lost with the source (the other writer deleted it), is
// reported, and blocks nothing.
func TestRenameDirSourceChangedElsewhere(t *testing.T) {
	e := newEnv(t)
	cached := e.put("d/cached", pattern(3000, 5))
	e.put("d/uncached", pattern(3000, 6))
	c := e.openWB(time.Hour)
	h := e.openHandle(c, cached)
	e.mustReadAll(h, pattern(3000, 5))
	h.Close() // complete in the cache from now on
	if _, err := c.RenameDir(e.ctx, "d/", "e/"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"d/cached", "d/uncached"} {
		if err := e.emu.Delete(bucketName, n); err != nil {
			t.Fatal(err)
		}
	}
	e.flush(c)
	if !bytes.Equal(e.object("e/cached"), pattern(3000, 5)) {
		t.Error("e/cached: the cached bytes were not uploaded")
	}
	if _, err := e.b.Stat(e.ctx, "e/uncached"); !errors.Is(err, transfer.ErrNotExist) {
		t.Errorf("e/uncached: %v, want not there (its source is gone)", err)
	}
	st := c.Status(0)
	found := false
	for _, ev := range st.Errors {
		found = found || (ev.Object == "e/uncached" && ev.Op == "copy")
	}
	if !found {
		t.Errorf("the lost copy is not among the recent errors: %+v", st.Errors)
	}
}

// TestRenameDirBiggerThanCache: the pending copies of a renamed directory
// that was never read take no room in the cache, so renaming a directory
// bigger than the cache leaves room for new files.
func TestRenameDirBiggerThanCache(t *testing.T) {
	e := newEnv(t)
	for i := range 3 {
		e.put("big/"+string(rune('a'+i)), pattern(60<<10, uint32(10+i)))
	}
	o := e.opts(100 << 10)
	o.WriteBackDelay = time.Hour
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.RenameDir(e.ctx, "big/", "moved/"); err != nil {
		t.Fatal(err)
	}
	if used := c.Stats().UsedBytes; used != 0 {
		t.Errorf("the cache counts %d bytes after renaming a directory it never read, want 0", used)
	}
	e.write(c, transfer.ObjectAttrs{Name: "new"}, true, 0, pattern(50<<10, 20))
	e.flush(c)
	for i := range 3 {
		if !bytes.Equal(e.object("moved/"+string(rune('a'+i))), pattern(60<<10, uint32(10+i))) {
			t.Errorf("moved/%c is wrong in the bucket", 'a'+i)
		}
	}
	if used := c.Stats().UsedBytes; used > 100<<10 {
		t.Errorf("the cache counts %d bytes after the flush, over its 100 KiB", used)
	}
}

// TestRenameDirAndBack: a directory renamed and renamed back before its
// copies were made leaves the bucket as it was (no copy, no deletion of
// the files).
func TestRenameDirAndBack(t *testing.T) {
	e := newEnv(t)
	a := e.put("d/a", pattern(3000, 30))
	e.put("d/sub/b", pattern(3000, 31))
	log := watchCopiesAndDeletes(e)
	c := e.openWB(time.Hour)
	if _, err := c.RenameDir(e.ctx, "d/", "e/"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RenameDir(e.ctx, "e/", "d/"); err != nil {
		t.Fatal(err)
	}
	h := e.openHandle(c, a)
	e.mustReadAll(h, pattern(3000, 30))
	h.Close()
	e.flush(c)
	for _, r := range log.list() {
		if strings.HasPrefix(r, "copy ") || r == "delete d/a" || r == "delete d/sub/b" {
			t.Errorf("the bucket saw %q: renaming back should leave the files alone", r)
		}
	}
	if !bytes.Equal(e.object("d/a"), pattern(3000, 30)) || !bytes.Equal(e.object("d/sub/b"), pattern(3000, 31)) {
		t.Error("the files changed")
	}
	for _, n := range []string{"e/a", "e/sub/b"} {
		if _, err := e.b.Stat(e.ctx, n); !errors.Is(err, transfer.ErrNotExist) {
			t.Errorf("%s: %v, want not there", n, err)
		}
	}
}

// TestRenamePendingCopy renames a file of a renamed directory before its
// copy is made: the pending copy moves to the new name (nothing is
// downloaded), survives a crash, and the flush copies the original
// straight to the file's last name.
func TestRenamePendingCopy(t *testing.T) {
	e := newEnv(t)
	e.put("d/big", pattern(300<<10, 7))
	c := e.openWB(time.Hour)
	if _, err := c.RenameDir(e.ctx, "d/", "e/"); err != nil {
		t.Fatal(err)
	}
	a, ok := c.Local("e/big")
	if !ok {
		t.Fatal("e/big is not a local change after the directory rename")
	}
	if _, err := c.Rename(e.ctx, a, "f/big", 0); err != nil {
		t.Fatal(err)
	}
	if n := e.mediaReads("d/big"); n != 0 {
		t.Fatalf("d/big was downloaded %d times to rename a pending copy", n)
	}
	if l, ok := c.Local("f/big"); !ok || l.Size != 300<<10 {
		t.Fatalf("Local(f/big) = %+v, %v", l, ok)
	}
	if _, ok := c.Local("e/big"); ok {
		t.Fatal("e/big is still there")
	}
	c.crash()
	log := watchCopiesAndDeletes(e) // before the restart, which sends them at once
	c2 := e.openWB(time.Hour)
	e.flush(c2)
	if n := e.mediaReads("d/big"); n != 0 {
		t.Errorf("d/big was downloaded %d times", n)
	}
	if log.index("copy f/big") < 0 {
		t.Errorf("requests %q, want a copy to f/big", log.list())
	}
	if !bytes.Equal(e.object("f/big"), pattern(300<<10, 7)) {
		t.Error("f/big in the bucket is wrong")
	}
	for _, n := range []string{"d/big", "e/big"} {
		if _, err := e.b.Stat(e.ctx, n); !errors.Is(err, transfer.ErrNotExist) {
			t.Errorf("%s after the flush: %v, want gone", n, err)
		}
	}
}

// TestRenameDirWhileAnUploadWaitsForASlot: a file's metadata change is
// due and taken for upload, but waits for a free upload slot; meanwhile
// its directory is renamed, which makes the old name a deletion whose
// version the new name's pending copy reads. When the slot frees, the
// deletion must wait for that copy: sent first, it destroyed the copy's
// source, and the renamed file was lost (found by the model tester:
// chown, then a rename of the directory, on a fresh mount).
func TestRenameDirWhileAnUploadWaitsForASlot(t *testing.T) {
	e := newEnv(t)
	data := pattern(3000, 7)
	e.put("d/f", data)
	other := e.put("x", []byte("other"))
	log := watchCopiesAndDeletes(e)
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		if r.Method == http.MethodPost && strings.Contains(r.URL.RawQuery, "name=x") {
			once.Do(func() { close(arrived) })
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		return 0, false
	})
	o := e.opts(64 << 20)
	o.UploadParallelism = 1
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// The only upload slot: held at the server.
	e.write(c, other, false, 0, []byte("OTHER"))
	select {
	case <-arrived:
	case <-e.ctx.Done():
		t.Fatal("the upload of x did not arrive")
	}
	// d/f's change is due and taken, and waits for the slot.
	fa, err := e.b.Stat(e.ctx, "d/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetMeta(e.ctx, fa, map[string]string{"bucketfs-uid": "4321"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e.ctx, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.queue.InFlight("d/f")
	}, "the change of d/f to be taken for upload")
	if _, err := c.RenameDir(e.ctx, "d/", "e/"); err != nil {
		t.Fatal(err)
	}
	close(release)
	e.flush(c)
	copied, deleted := log.index("copy e/f"), log.index("delete d/f")
	if copied < 0 || deleted < 0 || deleted < copied {
		t.Errorf("copied e/f at %d, deleted d/f at %d in %q; want the copy first", copied, deleted, log.list())
	}
	a, err := e.b.Stat(e.ctx, "e/f")
	if err != nil {
		t.Fatalf("e/f after the flush: %v (the renamed file is lost)", err)
	}
	if !bytes.Equal(e.object("e/f"), data) || a.Metadata["bucketfs-uid"] != "4321" {
		t.Errorf("e/f holds %d bytes with metadata %v, want the old content with uid 4321", a.Size, a.Metadata)
	}
	if _, err := e.b.Stat(e.ctx, "d/f"); !errors.Is(err, transfer.ErrNotExist) {
		t.Errorf("d/f after the flush: %v, want gone", err)
	}
}

// TestRenameAndExchangeReturnTheirBase: the target of a rename, and a
// name of an exchange, changed here and uploaded since the caller looked
// it up (the file system resolves names before it asks the cache, and an
// upload may be confirmed in between). Rename and Exchange return the
// generation the new record is based on, the upload's, not the caller's
// older one: the file system gives it to the nodes that follow the
// content, and the content's own upload, when confirmed, is matched to
// them by that base (fs/confirm.go). With the caller's generation, the
// model tester's node kept a version gone from the bucket and its next
// open answered ESTALE (seed 1795802702956144187).
func TestRenameAndExchangeReturnTheirBase(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	uploaded := func(name string) (before, after transfer.ObjectAttrs) {
		before = e.put(name, []byte("in the bucket"))
		e.write(c, before, true, 0, []byte("changed here"))
		e.flush(c)
		after, err := e.b.Stat(e.ctx, name)
		if err != nil || after.Generation == before.Generation {
			t.Fatalf("%s after the flush: %+v, %v", name, after, err)
		}
		return before, after
	}
	to, toNow := uploaded("to")
	e.write(c, transfer.ObjectAttrs{Name: "from"}, true, 0, []byte("renamed"))
	base, err := c.Rename(e.ctx, transfer.ObjectAttrs{Name: "from"}, "to", to.Generation)
	if err != nil {
		t.Fatal(err)
	}
	if base != toNow.Generation {
		t.Errorf("Rename's base %d, want the upload's %d (the caller said %d)", base, toNow.Generation, to.Generation)
	}

	x, xNow := uploaded("x")
	y := e.put("y", []byte("y"))
	baseX, baseY, err := c.Exchange(e.ctx, x, y)
	if err != nil {
		t.Fatal(err)
	}
	if baseX != xNow.Generation || baseY != y.Generation {
		t.Errorf("Exchange's bases %d and %d, want %d (the upload's; the caller said %d) and %d",
			baseX, baseY, xNow.Generation, x.Generation, y.Generation)
	}
	e.flush(c)
	for name, want := range map[string]string{"to": "renamed", "x": "y", "y": "changed here"} {
		if got := string(e.object(name)); got != want {
			t.Errorf("%s in the bucket: %q, want %q", name, got, want)
		}
	}
	if names := strings.Join(e.bucketNames(), ","); names != "to,x,y" {
		t.Errorf("the bucket holds %s, want to, x and y (no conflict copy, from deleted)", names)
	}
}

// copyJustMade renames directory d/, holding c0 ("copied", never read),
// to L/ with copies, and waits until the copy of L/c0 is made and has
// left the index.
func copyJustMade(t *testing.T) (*env, *Cache) {
	e := newEnv(t)
	e.put("d/c0", []byte("copied"))
	c := e.openWB(0)
	if _, err := c.RenameDir(e.ctx, "d/", "L/"); err != nil {
		t.Fatal(err)
	}
	e.flush(c)
	c.mu.Lock()
	_, kept := c.entries["L/c0"]
	c.mu.Unlock()
	if kept {
		t.Fatal("the copy is still in the index: this test needs it dropped")
	}
	return e, c
}

// TestRenameOverACopyJustMade renames a file over a name that a directory
// rename copied, after the copy was made and left the index (none of it
// was cached), with the base the file system looked up while the copy
// was still a local change: none. The replacement is based on the copy
// (madecopies.go): the name holds the renamed file and no conflict copy
// is made. Before, the bucket refused the upload and the renamed file
// was saved beside the copy (found by the model tester).
func TestRenameOverACopyJustMade(t *testing.T) {
	e, c := copyJustMade(t)
	e.write(c, transfer.ObjectAttrs{Name: "f"}, true, 0, []byte("renamed over it"))
	if _, err := c.Rename(e.ctx, transfer.ObjectAttrs{Name: "f"}, "L/c0", 0); err != nil {
		t.Fatal(err)
	}
	e.flush(c)
	if got := string(e.object("L/c0")); got != "renamed over it" {
		t.Errorf("L/c0 in the bucket: %q", got)
	}
	if names := strings.Join(e.bucketNames(), ","); names != "L/,L/c0" {
		t.Errorf("the bucket holds %s, want L/ and L/c0 only", names)
	}
}

// TestRenameOverAnUploadJustAnswered renames a file over one whose
// upload the bucket has just confirmed, before the upload is settled
// (after supersededDuring looked): the replacement is based on that
// upload at once, so its own upload is not refused first.
func TestRenameOverAnUploadJustAnswered(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(0)
	e.write(c, transfer.ObjectAttrs{Name: "f"}, true, 0, []byte("renamed over it"))
	var uploads atomic.Int32
	e.emu.SetAfterHook(func(r *http.Request) {
		if isUpload(r) && r.URL.Query().Get("name") == "a" {
			uploads.Add(1)
		}
	})
	var once sync.Once
	testAfterSend = func(name string) {
		if name != "a" {
			return
		}
		once.Do(func() {
			if _, err := c.Rename(e.ctx, transfer.ObjectAttrs{Name: "f"}, "a", 0); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(func() { testAfterSend = nil })
	e.write(c, transfer.ObjectAttrs{Name: "a"}, true, 0, []byte("a, uploading"))
	e.flush(c)
	if got := string(e.object("a")); got != "renamed over it" {
		t.Errorf("a in the bucket: %q", got)
	}
	if names := strings.Join(e.bucketNames(), ","); names != "a" {
		t.Errorf("the bucket holds %s, want a only", names)
	}
	if n := uploads.Load(); n != 2 {
		t.Errorf("%d uploads of a, want 2 (its own, then the renamed file's based on it)", n)
	}
}

// TestExchangeWithACopyJustMade is TestRenameOverACopyJustMade for
// RENAME_EXCHANGE: the copy's side, looked up while it was a local
// change (generation 0), is opened after it left the index, and is
// based on the copy's version (madecopies.go), not on none.
func TestExchangeWithACopyJustMade(t *testing.T) {
	e, c := copyJustMade(t)
	e.write(c, transfer.ObjectAttrs{Name: "f"}, true, 0, []byte("swapped in"))
	f, _ := c.Local("f")
	if _, _, err := c.Exchange(e.ctx, f, transfer.ObjectAttrs{Name: "L/c0", Size: int64(len("copied"))}); err != nil {
		t.Fatal(err)
	}
	e.flush(c)
	for name, want := range map[string]string{"L/c0": "swapped in", "f": "copied"} {
		if got := string(e.object(name)); got != want {
			t.Errorf("%s in the bucket: %q, want %q", name, got, want)
		}
	}
	if names := strings.Join(e.bucketNames(), ","); names != "L/,L/c0,f" {
		t.Errorf("the bucket holds %s, want L/, L/c0 and f only", names)
	}
}

// TestRenamesCountTheBytesOnce: a renamed file's bytes are its new
// name's (a hard link), so the cache counts them once, not again for the
// old name's deletion until that reaches the bucket. Before, each save
// by rename (write a temporary file, rename it over the real one) of a
// file of 40% of the cap left the cache counting 80% until the deletion
// was sent, and the next save found no room.
func TestRenamesCountTheBytesOnce(t *testing.T) {
	e := newEnv(t)
	// The deletions stay unsent; a write that finds no room fails after a
	// second.
	c := e.openSmall(time.Second)
	// Below the share of changes that sends them at once (space.Pressure):
	// nothing leaves before the flush at the end.
	for i := range 3 {
		e.write(c, transfer.ObjectAttrs{Name: "tmp"}, true, 0, pattern(40<<10, uint32(i)))
		if _, err := c.Rename(e.ctx, transfer.ObjectAttrs{Name: "tmp"}, "final", 0); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
		if used := c.Stats().UsedBytes; used != 40<<10 {
			t.Fatalf("save %d: the cache counts %d bytes, want the file's %d", i, used, 40<<10)
		}
	}
	e.write(c, transfer.ObjectAttrs{Name: "other"}, true, 0, pattern(15<<10, 7))
	// A directory's rename: a cached copy becomes a pending copy that
	// shares its bytes.
	a := e.put("d/x", pattern(8<<10, 9))
	e.cacheAll(c, a, pattern(8<<10, 9))
	before := c.Stats().UsedBytes
	if _, err := c.RenameDir(e.ctx, "d/", "e/"); err != nil {
		t.Fatal(err)
	}
	if used := c.Stats().UsedBytes; used != before {
		t.Errorf("after renaming a directory with a cached copy the cache counts %d bytes, want %d as before", used, before)
	}
	e.flush(c)
	for name, want := range map[string][]byte{"final": pattern(40<<10, 2), "other": pattern(15<<10, 7), "e/x": pattern(8<<10, 9)} {
		if !bytes.Equal(e.object(name), want) {
			t.Errorf("%s is wrong in the bucket", name)
		}
	}
	// The new directory gets a placeholder of its own (renameplan).
	if names := e.bucketNames(); !slices.Equal(names, []string{"e/", "e/x", "final", "other"}) {
		t.Errorf("the bucket holds %v, want e/, e/x, final and other", names)
	}
}

// TestFailedRenameKeepsTheTarget: a rename the journal refuses (a full
// disk) changes nothing, the file it was to replace above all. Before,
// the target's entry was dropped before the journal was written and its
// file removed when the write failed: a local change of the target not
// yet uploaded was lost, though rename(2) said it failed.
func TestFailedRenameKeepsTheTarget(t *testing.T) {
	for _, source := range []string{"file", "pending copy"} {
		t.Run(source, func(t *testing.T) {
			e := newEnv(t)
			e.put("d/x", pattern(20<<10, 1))
			c := e.openWB(time.Hour)
			from := transfer.ObjectAttrs{Name: "a"}
			if source == "file" {
				e.write(c, from, true, 0, pattern(20<<10, 1))
			} else {
				// A directory's rename makes e/x a pending copy, which
				// a rename moves as it is (renamePendingCopy).
				if _, err := c.RenameDir(e.ctx, "d/", "e/"); err != nil {
					t.Fatal(err)
				}
				var ok bool
				if from, ok = c.Local("e/x"); !ok {
					t.Fatal("e/x is not a pending copy")
				}
			}
			e.write(c, transfer.ObjectAttrs{Name: "b"}, true, 0, pattern(20<<10, 2))
			h, err := c.OpenWrite(e.ctx, transfer.ObjectAttrs{Name: "b"}, false, false)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			mend := breakJournal(c)
			_, err = c.Rename(e.ctx, from, "b", 0)
			mend()
			if err == nil {
				t.Fatal("a rename the journal refused succeeded")
			}
			// The target's handle still writes the target.
			if _, err := h.WriteAt([]byte("more"), 20<<10); err != nil {
				t.Fatalf("writing b after the failed rename: %v", err)
			}
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			wantB := append(pattern(20<<10, 2), "more"...)
			e.mustHaveLocal(c, map[string][]byte{"b": wantB, from.Name: pattern(20<<10, 1)})
			e.flush(c)
			if !bytes.Equal(e.object("b"), wantB) {
				t.Error("b is wrong in the bucket after the failed rename")
			}
			if !bytes.Equal(e.object(from.Name), pattern(20<<10, 1)) {
				t.Errorf("%s is wrong in the bucket after the failed rename", from.Name)
			}
		})
	}
}

// TestFailedRenameDirKeepsTheTargets: a directory's rename the journal
// refuses leaves what the cache had under the new prefix as it was: a
// deletion there not yet sent is sent, not forgotten (the file would
// come back).
func TestFailedRenameDirKeepsTheTargets(t *testing.T) {
	e := newEnv(t)
	e.put("d/x", pattern(10<<10, 1))
	gone := e.put("e/x", pattern(10<<10, 2))
	c := e.openWB(time.Hour)
	if err := c.Remove(e.ctx, "e/x", gone.Generation); err != nil {
		t.Fatal(err)
	}
	mend := breakJournal(c)
	_, err := c.RenameDir(e.ctx, "d/", "e/")
	mend()
	if err == nil {
		t.Fatal("a directory rename the journal refused succeeded")
	}
	if _, removed := c.LocalNames("e/"); !slices.Contains(removed, "e/x") {
		t.Errorf("e/x's deletion is gone after the failed rename: removed %v", removed)
	}
	e.flush(c)
	if names := e.bucketNames(); !slices.Equal(names, []string{"d/x"}) {
		t.Errorf("the bucket holds %v, want d/x alone", names)
	}
}

// partialDirCopy makes an object d/x of four chunks and a cache (write-
// back after an hour) that holds its first chunk only: the bucket
// refuses every read of the others until the caller lifts its hook
// (e.emu.SetHook(nil)). (Refusing every read after the first made the
// first chunk's own read fail when the read of the chunk ahead went
// first.)
func partialDirCopy(t *testing.T) (*env, *Cache, transfer.ObjectAttrs) {
	e := newEnv(t)
	a := e.put("d/x", pattern(4*chunk, 1))
	c := e.openWB(time.Hour)
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		return http.StatusServiceUnavailable, r.URL.Query().Get("alt") == "media" && !strings.HasPrefix(r.Header.Get("Range"), "bytes=0-")
	})
	h := e.openHandle(c, a)
	if _, err := h.ReadAt(e.ctx, make([]byte, 100), 0); err != nil {
		t.Fatal(err)
	}
	h.Close()
	return e, c, a
}

// TestRenameDirAfterAWriteMeanwhile: a file written while its
// directory's rename plans (a copy cached in part then, so planned as a
// copy of the bucket's version) moves with its bytes. Before, the plan
// held, and the write was lost: the new name got the bucket's version
// and the old name's file, with the write, was let go of.
func TestRenameDirAfterAWriteMeanwhile(t *testing.T) {
	e, c, a := partialDirCopy(t)
	testAfterPlan = func(string) {
		testAfterPlan = nil
		c.mu.Lock()
		partial := c.entries["d/x"] != nil && !c.entries["d/x"].Rec.Complete
		c.mu.Unlock()
		if !partial {
			t.Error("d/x is not a partial copy when the rename has planned")
		}
		e.emu.SetHook(nil)
		e.write(c, a, false, 0, []byte("LOCAL"))
	}
	defer func() { testAfterPlan = nil }()
	if _, err := c.RenameDir(e.ctx, "d/", "e/"); err != nil {
		t.Fatal(err)
	}
	e.flush(c)
	want := append([]byte("LOCAL"), pattern(4*chunk, 1)[5:]...)
	if !bytes.Equal(e.object("e/x"), want) {
		t.Error("e/x lost the write made while the rename planned")
	}
}

// TestRenameOverAnUploadEvicted: a file renamed over a name whose own
// upload has just settled and whose copy was evicted at once (a full
// cache), by a caller that looked the name up before the upload was
// confirmed (the local overlay said: based on what it replaced), is
// based on that upload. Before, with no entry left to say otherwise, the
// rename was based on the stale answer and saved beside the name as a
// conflict copy, the name keeping the older save.
func TestRenameOverAnUploadEvicted(t *testing.T) {
	e := newEnv(t)
	c := e.openSmall(0)
	e.write(c, transfer.ObjectAttrs{Name: "final"}, true, 0, pattern(40<<10, 1))
	looked, ok := c.Local("final") // what a lookup sees: the change, based on nothing
	if !ok || looked.Generation != 0 {
		t.Fatalf("Local(final) = %+v, %v; want a change based on no version", looked, ok)
	}
	e.flush(c)
	// The next save: its room evicts final's clean copy.
	e.write(c, transfer.ObjectAttrs{Name: "tmp"}, true, 0, pattern(70<<10, 2))
	if s := c.Stats(); s.Evictions == 0 {
		t.Fatalf("final's copy was not evicted: %+v", s)
	}
	if _, err := c.Rename(e.ctx, transfer.ObjectAttrs{Name: "tmp"}, "final", looked.Generation); err != nil {
		t.Fatal(err)
	}
	e.flush(c)
	if names := e.bucketNames(); !slices.Equal(names, []string{"final"}) {
		t.Errorf("the bucket holds %v, want final alone", names)
	}
	if !bytes.Equal(e.object("final"), pattern(70<<10, 2)) {
		t.Error("final is not the last save")
	}
}

// TestRenameDirAfterAnOpenMeanwhile: a file opened for writing while its
// directory's rename plans (a copy cached in part then, so planned as a
// copy of the bucket's version; the open completes it) moves with its
// bytes and its handle. Before, the handle moved to the new name, whose
// file was an empty one standing for the copy, while its descriptor
// still wrote the old name's file: the bucket got zeros.
func TestRenameDirAfterAnOpenMeanwhile(t *testing.T) {
	e, c, a := partialDirCopy(t)
	var w *WriteHandle
	testAfterPlan = func(string) {
		testAfterPlan = nil
		e.emu.SetHook(nil)
		var err error
		if w, err = c.OpenWrite(e.ctx, a, false, false); err != nil {
			t.Error(err)
		}
	}
	defer func() { testAfterPlan = nil }()
	if _, err := c.RenameDir(e.ctx, "d/", "e/"); err != nil {
		t.Fatal(err)
	}
	if w == nil {
		t.Fatal("the open during the rename failed")
	}
	if _, err := w.WriteAt([]byte("LOCAL"), 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	e.flush(c)
	want := append([]byte("LOCAL"), pattern(4*chunk, 1)[5:]...)
	if got := e.object("e/x"); !bytes.Equal(got, want) {
		t.Errorf("e/x in the bucket: %d bytes, not the write over the old content (starts %q)", len(got), got[:min(8, len(got))])
	}
}

// TestRenamesOntoOneNameTakeTurns: a rename onto a name whose entry
// another rename is still making waits for it, and a failed rename puts
// back the file it was to replace only if nothing else took the name.
// Before, the second rename set the first one's entry aside, and the
// first one's failure put the original file back over the second
// rename's, which had succeeded: its content never reached the bucket.
// (The kernel serialises renames onto one name; the cache does too.)
func TestRenamesOntoOneNameTakeTurns(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	for i, name := range []string{"a", "b", "y"} {
		e.write(c, transfer.ObjectAttrs{Name: name}, true, 0, pattern(10<<10, uint32(i+1)))
	}
	c.mu.Lock()
	ea, ey, eb := c.entries["a"], c.entries["y"], c.entries["b"]
	c.mu.Unlock()
	entryAt := func(name string) *entry {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.entries[name]
	}
	// Rename A (a over b) stops before its journal entry.
	ea.PersistMu.Lock()
	errA := make(chan error, 1)
	go func() { _, err := c.Rename(e.ctx, transfer.ObjectAttrs{Name: "a"}, "b", 0); errA <- err }()
	waitFor(t, e.ctx, func() bool { return entryAt("b") != eb }, "rename A to publish its entry")
	neA := entryAt("b")
	// Rename B (y over b) waits for A's entry, then stops before its own
	// journal entry.
	ey.PersistMu.Lock()
	errB := make(chan error, 1)
	go func() { _, err := c.Rename(e.ctx, transfer.ObjectAttrs{Name: "y"}, "b", 0); errB <- err }()
	// B does not take A's entry on its way (before, it set it aside
	// within microseconds).
	stillWaiting(t, errB, "rename B")
	if entryAt("b") != neA {
		t.Fatal("rename B replaced rename A's entry while it was on its way")
	}
	// A fails.
	mend := breakJournal(c)
	ea.PersistMu.Unlock()
	if err := <-errA; err == nil {
		t.Fatal("rename A with a broken journal succeeded")
	}
	mend()
	waitFor(t, e.ctx, func() bool { cur := entryAt("b"); return cur != eb && cur != neA }, "rename B to publish its entry")
	ey.PersistMu.Unlock()
	if err := <-errB; err != nil {
		t.Fatalf("rename B: %v", err)
	}
	e.flush(c)
	if names := e.bucketNames(); !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("the bucket holds %v, want a and b", names)
	}
	if !bytes.Equal(e.object("b"), pattern(10<<10, 3)) {
		t.Error("b is not y's content, which rename B put there")
	}
	if !bytes.Equal(e.object("a"), pattern(10<<10, 1)) {
		t.Error("a lost its content after its rename failed")
	}
}

// TestRenameDirWaitsForATargetOnItsWay: a directory's rename does not
// set aside an entry under its new prefix that another rename is still
// making. Before, it did; when both renames then failed (a full disk),
// the first one's restore gave way to the directory's entry, and the
// directory's undo restored the first one's, already gone: the file
// both were to replace, with its changes, was lost.
func TestRenameDirWaitsForATargetOnItsWay(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	for i, name := range []string{"a", "e/x", "d/x"} {
		e.write(c, transfer.ObjectAttrs{Name: name}, true, 0, pattern(10<<10, uint32(i+1)))
	}
	entryAt := func(name string) *entry {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.entries[name]
	}
	ea, ex, ed := entryAt("a"), entryAt("e/x"), entryAt("d/x")
	// X, a over e/x, stops before its journal entry.
	ea.PersistMu.Lock()
	errX := make(chan error, 1)
	go func() { _, err := c.Rename(e.ctx, transfer.ObjectAttrs{Name: "a"}, "e/x", 0); errX <- err }()
	waitFor(t, e.ctx, func() bool { return entryAt("e/x") != ex }, "X to publish its entry")
	neX := entryAt("e/x")
	// D, d/ to e/, will stop before its own journal entry.
	ed.PersistMu.Lock()
	errD := make(chan error, 1)
	go func() { _, err := c.RenameDir(e.ctx, "d/", "e/"); errD <- err }()
	stillWaiting(t, errD, "D") // before, D set X's entry aside within microseconds
	if entryAt("e/x") != neX {
		t.Fatal("D replaced X's entry while it was on its way")
	}
	mend := breakJournal(c)
	ea.PersistMu.Unlock()
	if err := <-errX; err == nil {
		t.Fatal("X succeeded with a broken journal")
	}
	waitFor(t, e.ctx, func() bool { cur := entryAt("e/x"); return cur != ex && cur != neX }, "D to publish its entries")
	ed.PersistMu.Unlock()
	if err := <-errD; err == nil {
		t.Fatal("D succeeded with a broken journal")
	}
	mend()
	e.mustHaveLocal(c, map[string][]byte{"a": pattern(10<<10, 1), "e/x": pattern(10<<10, 2), "d/x": pattern(10<<10, 3)})
	e.flush(c)
	if names := e.bucketNames(); !slices.Equal(names, []string{"a", "d/x", "e/x"}) {
		t.Errorf("the bucket holds %v, want a, d/x and e/x", names)
	}
}

// TestRenameDirAfterAFileLeftMeanwhile: a file renamed out of a
// directory while the directory's rename plans (a copy cached in part
// then, so planned as a copy of the bucket's version) does not come back
// under the new name. Before, the plan held (only a linked move's
// deletion made it stale): the old name stayed the file rename's
// deletion, and the new name got a pending copy of the version that had
// left, so the file was in two places.
func TestRenameDirAfterAFileLeftMeanwhile(t *testing.T) {
	e, c, a := partialDirCopy(t)
	testAfterPlan = func(string) {
		testAfterPlan = nil
		e.emu.SetHook(nil)
		if _, err := c.Rename(e.ctx, a, "elsewhere", 0); err != nil {
			t.Error(err)
		}
	}
	defer func() { testAfterPlan = nil }()
	if _, err := c.RenameDir(e.ctx, "d/", "e/"); err != nil {
		t.Fatal(err)
	}
	e.flush(c)
	if names := e.bucketNames(); !slices.Equal(names, []string{"e/", "elsewhere"}) && !slices.Equal(names, []string{"elsewhere"}) {
		t.Errorf("the bucket holds %v, want elsewhere (and the directory e/) alone", names)
	}
	if !bytes.Equal(e.object("elsewhere"), pattern(4*chunk, 1)) {
		t.Error("elsewhere is not the file renamed")
	}
}
