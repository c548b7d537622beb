package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/transfer"
)

// The write-back tests use the emulator, which honours generation
// preconditions on uploads (the conflict path depends on that).

func (e *env) openWB(delay time.Duration) *Cache {
	e.t.Helper()
	o := e.opts(64 << 20)
	o.WriteBackDelay = delay
	c, err := Open(o, e.b)
	if err != nil {
		e.t.Fatalf("cache.Open: %v", err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// openSmall opens a cache of 100 KiB that writes back after an hour,
// waiting up to fullWait (0: the default) for room; it is closed when
// the test ends.
func (e *env) openSmall(fullWait time.Duration) *Cache {
	e.t.Helper()
	o := e.opts(100 << 10)
	o.WriteBackDelay = time.Hour
	o.FullWait = fullWait
	c, err := Open(o, e.b)
	if err != nil {
		e.t.Fatalf("cache.Open: %v", err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

func (e *env) object(name string) []byte {
	e.t.Helper()
	var buf bytes.Buffer
	a, err := e.b.Stat(e.ctx, name)
	if err != nil {
		e.t.Fatalf("stat %s: %v", name, err)
	}
	if _, err := e.b.ReadRange(e.ctx, name, a.Generation, 0, a.Size, &buf); err != nil {
		e.t.Fatalf("read %s: %v", name, err)
	}
	return buf.Bytes()
}

func (e *env) write(c *Cache, a transfer.ObjectAttrs, trunc bool, off int64, data []byte) {
	e.t.Helper()
	w, err := c.OpenWrite(e.ctx, a, trunc, false)
	if err != nil {
		e.t.Fatalf("OpenWrite %s: %v", a.Name, err)
	}
	if _, err := w.WriteAt(data, off); err != nil {
		e.t.Fatalf("WriteAt: %v", err)
	}
	if err := w.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
}

func (e *env) flush(c *Cache) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	if left := c.Flush(ctx, nil); left != nil {
		e.t.Fatalf("Flush left %v dirty", left)
	}
}

// isUpload reports whether r starts an upload: a single request, or the
// start of a resumable session (not the session's later requests).
func isUpload(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/upload/") && !r.URL.Query().Has("upload_id")
}

func TestWriteNewAndExisting(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(0)
	e.write(c, transfer.ObjectAttrs{Name: "new.txt"}, true, 0, []byte("hello"))

	v1 := pattern(objSize, 1)
	a := e.put("old", v1)
	e.write(c, a, false, 5000, []byte("PATCH"))
	want := append([]byte(nil), v1...)
	copy(want[5000:], "PATCH")

	var seen []Progress
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	if left := c.Flush(ctx, func(p Progress) { seen = append(seen, p) }); left != nil {
		t.Fatalf("Flush left %v", left)
	}
	if got := e.object("new.txt"); string(got) != "hello" {
		t.Errorf("new.txt in the bucket = %q", got)
	}
	if got := e.object("old"); !bytes.Equal(got, want) {
		t.Error("old in the bucket does not have the patch")
	}
	if len(seen) == 0 || seen[len(seen)-1].Files != 0 {
		t.Errorf("progress reports %v, want a last report of 0 files", seen)
	}
	s := c.Stats()
	if s.DirtyFiles != 0 || s.Uploads != 2 || s.Conflicts != 0 {
		t.Errorf("stats %+v", s)
	}
	// The uploaded copy is clean and current: reading it needs no download.
	a2, _ := e.b.Stat(e.ctx, "old")
	before := e.mediaReads("old")
	h := e.openHandle(c, a2)
	e.mustReadAll(h, want)
	h.Close()
	if e.mediaReads("old") != before {
		t.Error("the uploaded version was downloaded again")
	}
}

func TestConflictKeepsBothVersions(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour) // nothing goes up until Flush
	a := e.put("doc", []byte("base"))
	e.write(c, a, true, 0, []byte("local change"))
	e.put("doc", []byte("remote change")) // someone else, meanwhile
	e.flush(c)

	if got := string(e.object("doc")); got != "remote change" {
		t.Errorf("doc = %q, want the remote version to stay", got)
	}
	page, err := e.b.List(e.ctx, transfer.ListQuery{Prefix: "doc.bucketfs-conflict-"})
	if err != nil || len(page.Objects) != 1 {
		t.Fatalf("conflict copies: %+v, %v", page.Objects, err)
	}
	if got := string(e.object(page.Objects[0].Name)); got != "local change" {
		t.Errorf("%s = %q, want the local version", page.Objects[0].Name, got)
	}
	if s := c.Stats(); s.Conflicts != 1 || s.DirtyFiles != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestChangeDuringUploadIsUploadedAgain(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(0)
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	first := true
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		if isUpload(r) && first {
			first = false
			arrived <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		return 0, false
	})
	e.write(c, transfer.ObjectAttrs{Name: "f"}, true, 0, []byte("one"))
	select {
	case <-arrived:
	case <-e.ctx.Done():
		t.Fatal("the upload did not start")
	}
	// Change the file while its first version is on the wire.
	w, err := c.OpenWrite(e.ctx, transfer.ObjectAttrs{Name: "f"}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("two, longer"), 0); err != nil {
		t.Fatal(err)
	}
	close(release)
	w.Close()
	e.flush(c)
	if got := string(e.object("f")); got != "two, longer" {
		t.Errorf("f = %q, want the version written during the first upload", got)
	}
	if s := c.Stats(); s.Uploads != 2 || s.DirtyFiles != 0 {
		t.Errorf("stats %+v, want 2 uploads and nothing dirty", s)
	}
}

// A crash (no Close, no flush) after the write returned loses nothing:
// the next start re-queues the change.
func TestCrashRecoveryRequeues(t *testing.T) {
	e := newEnv(t)
	e.emu.SetHook(func(r *http.Request) (int, bool) { return 503, isUpload(r) })
	o := e.opts(64 << 20)
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(3*chunk+7, 9)
	e.write(c, transfer.ObjectAttrs{Name: "precious"}, true, 0, data)
	// Kill: stop the goroutines and drop the index without any cleanup.
	c.crash()
	if r := records(t, e.dir)["precious"]; !r.Dirty {
		t.Fatalf("after the write returned the index says %+v, want dirty", r)
	}

	e.emu.SetHook(nil)
	c2 := e.openWB(time.Hour)
	e.flush(c2)
	if got := e.object("precious"); !bytes.Equal(got, data) {
		t.Errorf("after the crash and a restart the bucket has %d bytes, want the %d written", len(got), len(data))
	}
}

// A refused upload keeps the data: Flush gives up at its deadline, the
// change stays dirty through a clean restart, never evicted, and goes up
// once the bucket accepts it.
func TestRefusedUploadStaysDirty(t *testing.T) {
	e := newEnv(t)
	e.emu.SetHook(func(r *http.Request) (int, bool) { return 403, isUpload(r) })
	o := e.opts(3 * chunk)
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(2*chunk, 3)
	e.write(c, transfer.ObjectAttrs{Name: "kept"}, true, 0, data)
	ctx, cancel := context.WithTimeout(e.ctx, 500*time.Millisecond)
	left := c.Flush(ctx, nil)
	cancel()
	if len(left) != 1 || left[0] != "kept" {
		t.Fatalf("Flush with uploads refused left %v, want [kept]", left)
	}
	// Something else needs the space: it is read uncached rather than
	// evicting the dirty file.
	other := e.put("other", pattern(2*chunk, 4))
	h := e.openHandle(c, other)
	h.Close()
	if s := c.Stats(); s.DirtyFiles != 1 || s.Uncached != 1 {
		t.Errorf("stats %+v, want the dirty file kept and the other object uncached", s)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	e.emu.SetHook(nil)
	c2, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	e.flush(c2)
	if got := e.object("kept"); !bytes.Equal(got, data) {
		t.Error("the change refused earlier reached the bucket wrong")
	}
}

func TestTruncateAndSync(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	a := e.put("t", pattern(objSize, 5))
	w, err := c.OpenWrite(e.ctx, a, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Truncate(100); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	recs, err := c.j.Records() // what a crash now would leave
	if err != nil {
		t.Fatal(err)
	}
	if r := recs["t"]; !r.Dirty || r.Size != 100 {
		t.Errorf("after Sync the record is %+v, want dirty with size 100", r)
	}
	if w.Size() != 100 {
		t.Errorf("Size = %d", w.Size())
	}
	w.Close()
	e.flush(c)
	if got := e.object("t"); !bytes.Equal(got, pattern(objSize, 5)[:100]) {
		t.Errorf("truncated object has %d bytes", len(got))
	}
}

// When changes not yet uploaded fill the cache, a write waits for uploads
// and then fails with ErrNoSpace; nothing goes over the cap, nothing is
// lost, and once uploads go through, writing works again.
func TestFullOfChangesBackpressure(t *testing.T) {
	e := newEnv(t)
	e.emu.SetHook(func(r *http.Request) (int, bool) { return 503, isUpload(r) })
	o := e.opts(4 * chunk)
	o.FullWait = 300 * time.Millisecond
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	e.write(c, transfer.ObjectAttrs{Name: "a"}, true, 0, pattern(3*chunk, 1))
	w, err := c.OpenWrite(e.ctx, transfer.ObjectAttrs{Name: "b"}, true, false)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteAt(pattern(2*chunk, 2), 0); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("write past a cache full of changes: %v, want ErrNoSpace", err)
	}
	if s := c.Stats(); s.UsedBytes > 4*chunk {
		t.Errorf("used %d bytes, over the %d cap", s.UsedBytes, 4*chunk)
	}
	e.emu.SetHook(nil)
	// Now "a" can go up, and its copy, clean, can make room.
	if _, err := w.WriteAt(pattern(2*chunk, 2), 0); err != nil {
		t.Fatalf("write once uploads work again: %v", err)
	}
	w.Close()
	e.flush(c)
	if !bytes.Equal(e.object("a"), pattern(3*chunk, 1)) || !bytes.Equal(e.object("b"), pattern(2*chunk, 2)) {
		t.Error("the bucket does not hold both files")
	}
}

// A deletion made while the file's upload is on the wire reaches the
// bucket after it: the object ends up deleted, not resurrected.
func TestRemoveDuringUpload(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(0)
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	var once sync.Once
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		if isUpload(r) {
			once.Do(func() {
				arrived <- struct{}{}
				select {
				case <-release:
				case <-r.Context().Done():
				}
			})
		}
		return 0, false
	})
	e.write(c, transfer.ObjectAttrs{Name: "f"}, true, 0, []byte("soon deleted"))
	select {
	case <-arrived:
	case <-e.ctx.Done():
		t.Fatal("the upload did not start")
	}
	if err := c.Remove(e.ctx, "f", 0); err != nil {
		t.Fatal(err)
	}
	close(release)
	e.flush(c)
	if _, err := e.b.Stat(e.ctx, "f"); !errors.Is(err, transfer.ErrNotExist) {
		t.Errorf("after the deletion was flushed: stat %v, want ErrNotExist", err)
	}
	if s := c.Stats(); s.DirtyFiles != 0 {
		t.Errorf("stats %+v", s)
	}
}

// A deletion survives a crash, and a name deleted then written again
// ends up with the new content.
func TestRemoveThenRecreate(t *testing.T) {
	e := newEnv(t)
	a := e.put("x", []byte("old"))
	e.put("y", []byte("keep?"))
	c := e.openWB(time.Hour)
	if err := c.Remove(e.ctx, "x", a.Generation); err != nil {
		t.Fatal(err)
	}
	ya, _ := e.b.Stat(e.ctx, "y")
	if err := c.Remove(e.ctx, "y", ya.Generation); err != nil {
		t.Fatal(err)
	}
	e.write(c, transfer.ObjectAttrs{Name: "x"}, true, 0, []byte("new"))
	// Crash before anything went up.
	c.crash()

	c2 := e.openWB(time.Hour)
	e.flush(c2)
	if got := string(e.object("x")); got != "new" {
		t.Errorf("x = %q, want the content written after the deletion", got)
	}
	if _, err := e.b.Stat(e.ctx, "y"); !errors.Is(err, transfer.ErrNotExist) {
		t.Errorf("y after a crash and restart: stat %v, want deleted", err)
	}
}

// A rename is one index change: after a crash right after it, the next
// start sends both halves (new name uploaded, old name deleted).
func TestRenameSurvivesCrash(t *testing.T) {
	e := newEnv(t)
	a := e.put("src", pattern(objSize, 8))
	c := e.openWB(time.Hour)
	if _, err := c.Rename(e.ctx, a, "dst", 0); err != nil {
		t.Fatal(err)
	}
	c.crash()

	c2 := e.openWB(time.Hour)
	e.flush(c2)
	if !bytes.Equal(e.object("dst"), pattern(objSize, 8)) {
		t.Error("dst does not hold src's content")
	}
	if _, err := e.b.Stat(e.ctx, "src"); !errors.Is(err, transfer.ErrNotExist) {
		t.Errorf("src after the rename went through: %v, want deleted", err)
	}
}

func TestLocalNamesIndex(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	y := e.put("a/y", []byte("a/y")) // a deletion the bucket must get
	for _, n := range []string{"a/x", "ab", "b/z"} {
		e.write(c, transfer.ObjectAttrs{Name: n}, true, 0, []byte(n))
	}
	if err := c.Remove(e.ctx, "a/y", y.Generation); err != nil {
		t.Fatal(err)
	}
	// A name the bucket never had is deleted at once (issue 26): it
	// leaves the overlay with nothing to send.
	if err := c.Remove(e.ctx, "b/z", 0); err != nil {
		t.Fatal(err)
	}
	if present, removed := c.LocalNames("b/"); present != nil || removed != nil {
		t.Errorf("LocalNames(b/) = %v, %v after deleting a file never uploaded, want nothing", present, removed)
	}
	present, removed := c.LocalNames("a/")
	if !slices.Equal(present, []string{"a/x"}) || !slices.Equal(removed, []string{"a/y"}) {
		t.Errorf("LocalNames(a/) = %v, %v", present, removed)
	}
	if present, _ := c.LocalNames("a"); !slices.Equal(present, []string{"a/x", "ab"}) {
		t.Errorf("LocalNames(a) = %v", present)
	}
	e.flush(c)
	if present, removed := c.LocalNames(""); present != nil || removed != nil {
		t.Errorf("after a flush LocalNames = %v, %v, want nothing", present, removed)
	}
	e.write(c, transfer.ObjectAttrs{Name: "a/x"}, false, 0, []byte("again"))
	if present, _ := c.LocalNames(""); !slices.Equal(present, []string{"a/x"}) {
		t.Errorf("a name changed again after a flush: LocalNames = %v", present)
	}
}

// TestLocalSubdirs: the subdirectories that local changes make (a name
// written under them, at any depth) or remove (their placeholder deleted,
// nothing written under them), by their names in the directory; names
// directly in it and names that sort between a subdirectory's ("a-b"
// before "a/") are no subdirectories.
func TestLocalSubdirs(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	for _, n := range []string{"d/c/", "d/e/", "d/e/z"} {
		e.write(c, transfer.ObjectAttrs{Name: n}, true, 0, nil)
	}
	e.flush(c)
	for _, n := range []string{"d/f", "d/a-b", "d/a/", "d/a/x", "d/b/deep/y"} {
		e.write(c, transfer.ObjectAttrs{Name: n}, true, 0, []byte(n))
	}
	for _, n := range []string{"d/c/", "d/e/z", "d/e/"} {
		if err := c.Remove(e.ctx, n, -1); err != nil {
			t.Fatal(err)
		}
	}
	if present, removed := c.LocalSubdirs("d/"); !slices.Equal(present, []string{"a", "b"}) || !slices.Equal(removed, []string{"c", "e"}) {
		t.Errorf("LocalSubdirs(d/) = %v, %v; want [a b], [c e]", present, removed)
	}
	if present, removed := c.LocalSubdirs(""); !slices.Equal(present, []string{"d"}) || removed != nil {
		t.Errorf("LocalSubdirs() = %v, %v; want [d], none", present, removed)
	}
	if present, removed := c.LocalSubdirs("d/a/"); present != nil || removed != nil {
		t.Errorf("LocalSubdirs(d/a/) = %v, %v; want none", present, removed)
	}
	e.flush(c)
	if present, removed := c.LocalSubdirs("d/"); present != nil || removed != nil {
		t.Errorf("after a flush LocalSubdirs(d/) = %v, %v; want none", present, removed)
	}
}

// stagingRecords returns the staging prefixes noted in c's index.
func stagingRecords(t *testing.T, c *Cache) []string {
	t.Helper()
	recs, err := durable.LoadStaging(c.db)
	if err != nil {
		t.Fatalf("reading staging records: %v", err)
	}
	var out []string
	for k := range recs {
		out = append(out, k)
	}
	sort.Strings(out) // as bbolt lists them
	return out
}

// staged returns the objects under transfer.StagingPrefix in the bucket.
func (e *env) staged() []string {
	e.t.Helper()
	page, err := e.b.List(e.ctx, transfer.ListQuery{Prefix: transfer.StagingPrefix})
	if err != nil {
		e.t.Fatalf("listing staged objects: %v", err)
	}
	var out []string
	for _, o := range page.Objects {
		out = append(out, o.Name)
	}
	return out
}

func isCompose(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/compose")
}

// Large files go up in parts; parts staged by an upload that a crash cut
// short are cleaned up by the next start, and the file still goes up.
func TestLargeUploadInPartsAndCrashCleanup(t *testing.T) {
	e := newEnv(t)
	open := func() *Cache {
		o := e.opts(64 << 20)
		o.WriteBackDelay = time.Hour
		o.Large = transfer.NewParallel(e.b, transfer.ParallelOptions{PartSize: 4 << 10, Parallelism: 4, RetryBase: time.Millisecond})
		o.LargeThreshold = 16 << 10
		c, err := Open(o, e.b)
		if err != nil {
			t.Fatalf("cache.Open: %v", err)
		}
		return c
	}
	var parts, composes atomic.Int64
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		if strings.Contains(r.URL.Query().Get("name"), transfer.StagingPrefix) {
			parts.Add(1)
		}
		if isCompose(r) {
			composes.Add(1)
		}
		return 0, false
	})
	c := open()
	small, large := pattern(16<<10-1, 1), pattern(100<<10+5, 2)
	e.write(c, transfer.ObjectAttrs{Name: "small"}, true, 0, small)
	e.write(c, transfer.ObjectAttrs{Name: "large"}, true, 0, large)
	e.flush(c)
	if got := e.object("large"); !bytes.Equal(got, large) {
		t.Fatalf("large: the bucket has %d bytes, want the %d written", len(got), len(large))
	}
	if got := e.object("small"); !bytes.Equal(got, small) {
		t.Fatalf("small: the bucket has %d bytes, want the %d written", len(got), len(small))
	}
	if parts.Load() != 26 || composes.Load() == 0 {
		t.Errorf("%d parts and %d composes sent; want 26 parts of 4 KiB for the large file only, and composes", parts.Load(), composes.Load())
	}
	if s := stagingRecords(t, c); len(s) != 0 {
		t.Errorf("staging records left after the uploads: %v", s)
	}
	if s := e.staged(); len(s) != 0 {
		t.Errorf("staged objects left after the uploads: %v", s)
	}

	// A crash in the middle: composes hang until the process "dies".
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		if isCompose(r) {
			<-r.Context().Done()
			return http.StatusServiceUnavailable, true
		}
		return 0, false
	})
	large2 := pattern(64<<10, 3)
	a, err := e.b.Stat(e.ctx, "large")
	if err != nil {
		t.Fatal(err)
	}
	e.write(c, a, true, 0, large2)
	ctx, cancel := context.WithCancel(e.ctx)
	flushed := make(chan struct{})
	go func() {
		// Flush starts the upload at once; the crash comes once the
		// parts are staged and the compose hangs.
		defer close(flushed)
		c.Flush(ctx, nil)
	}()
	for len(e.staged()) < 16 {
		select {
		case <-e.ctx.Done():
			t.Fatalf("the parts were never staged: %v", e.staged())
		case <-time.After(10 * time.Millisecond):
		}
	}
	c.loops.StopUploads()
	cancel()
	<-flushed
	if s := stagingRecords(t, c); len(s) != 1 {
		t.Fatalf("after the crash the index notes staging prefixes %v, want one", s)
	}
	c.crash()

	e.emu.SetHook(nil)
	c2 := open()
	defer c2.Close()
	e.flush(c2)
	if got := e.object("large"); !bytes.Equal(got, large2) {
		t.Fatalf("after the crash and a restart the bucket has %d bytes, want the %d written", len(got), len(large2))
	}
	// The cleaner runs in the background from the start.
	deadline := time.Now().Add(30 * time.Second)
	for len(stagingRecords(t, c2)) > 0 || len(e.staged()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the restart: staging records %v, staged objects %v; want none", stagingRecords(t, c2), e.staged())
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, bounded
	}
}

// An upload that reached the bucket but whose answer a crash kept from
// the cache: the next start recognises the object as its own (by the
// upload ID in its metadata), so it neither saves a conflict copy nor
// leaves a deleted file in the bucket.
func TestUnconfirmedUploadAfterCrash(t *testing.T) {
	for _, del := range []bool{false, true} {
		t.Run(fmt.Sprintf("deleted=%v", del), func(t *testing.T) {
			e := newEnv(t)
			c, err := Open(e.opts(64<<20), e.b)
			if err != nil {
				t.Fatal(err)
			}
			// Uploads take effect, and their answers never come.
			e.emu.SetAfterHook(func(r *http.Request) {
				if isUpload(r) {
					<-r.Context().Done()
				}
			})
			data := pattern(5000, 4)
			e.write(c, transfer.ObjectAttrs{Name: "f"}, true, 0, data)
			ctx, cancel := context.WithCancel(e.ctx)
			flushed := make(chan struct{})
			go func() {
				defer close(flushed)
				c.Flush(ctx, nil)
			}()
			for {
				if _, err := e.emu.Generation(bucketName, "f"); err == nil {
					break
				}
				select {
				case <-e.ctx.Done():
					t.Fatal("the upload never reached the bucket")
				case <-time.After(5 * time.Millisecond): // polling a condition, bounded by e.ctx
				}
			}
			c.crash()
			cancel()
			<-flushed
			e.emu.SetAfterHook(nil)

			c2 := e.openWB(time.Hour)
			if del {
				if err := c2.Remove(e.ctx, "f", 0); err != nil {
					t.Fatal(err)
				}
			}
			e.flush(c2)
			_, err = e.b.Stat(e.ctx, "f")
			switch {
			case del && !errors.Is(err, transfer.ErrNotExist):
				t.Errorf("after an acknowledged deletion the bucket still has f (Stat: %v)", err)
			case !del && err != nil:
				t.Errorf("f is not in the bucket: %v", err)
			case !del && !bytes.Equal(e.object("f"), data):
				t.Errorf("f in the bucket differs from what was written")
			}
			page, err := e.b.List(e.ctx, transfer.ListQuery{Prefix: "f.bucketfs-conflict"})
			if err != nil || len(page.Objects) != 0 {
				t.Errorf("conflict copies: %v (%v); want none: the object was this cache's own upload", page.Objects, err)
			}
			if s := c2.Stats(); s.Conflicts != 0 {
				t.Errorf("%d conflicts counted, want 0", s.Conflicts)
			}
		})
	}
}

// A name renamed away or deleted, then written again, gets a cache file
// of its own: the renamed file and handles still open on the deleted one
// keep their bytes. (Rename used to leave the old name's record on a hard
// link of the new name's file, and writing the old name again wrote into
// both.)
func TestRewriteAfterRenameOrUnlinkKeepsOtherBytes(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	first, second, third := pattern(7000, 1), pattern(3000, 2), pattern(5000, 3)

	e.write(c, transfer.ObjectAttrs{Name: "a"}, true, 0, first)
	a, _ := c.Local("a")
	if _, err := c.Rename(e.ctx, a, "b", 0); err != nil {
		t.Fatalf("Rename: %v", err)
	}
	e.write(c, transfer.ObjectAttrs{Name: "a"}, true, 0, second)
	bAttrs, _ := c.Local("b")
	e.mustReadAll(e.openHandle(c, bAttrs), first)

	// Unlink while a reader has the file open, then write the name again.
	xa := transfer.ObjectAttrs{Name: "x"}
	e.write(c, xa, true, 0, first)
	xa, _ = c.Local("x")
	h := e.openHandle(c, xa)
	if err := c.Remove(e.ctx, "x", 0); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	e.write(c, transfer.ObjectAttrs{Name: "x"}, true, 0, third)
	e.mustReadAll(h, first)

	e.flush(c)
	for name, want := range map[string][]byte{"a": second, "b": first, "x": third} {
		if got := e.object(name); !bytes.Equal(got, want) {
			t.Errorf("%s in the bucket: %d bytes, want the %d written last", name, len(got), len(want))
		}
	}
}

// A write handle belongs to the file: after a rename its writes are the
// new name's (uploaded there, counted until it closes); after a deletion
// they go to the handle's own copy and never to the bucket.
func TestWriteHandlesFollowRenameAndSurviveDelete(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	w, err := c.OpenWrite(e.ctx, transfer.ObjectAttrs{Name: "a"}, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("one,"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Rename(e.ctx, transfer.ObjectAttrs{Name: "a"}, "b", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("two"), 4); err != nil {
		t.Fatalf("write after rename: %v", err)
	}
	if la, ok := c.Local("b"); !ok || la.Size != 7 {
		t.Errorf("b after a write through the moved handle: %+v %v, want 7 bytes", la, ok)
	}
	// Still open for writing: a flush now must not mark b clean under
	// the open handle, and must not upload a.
	d, err := c.OpenWrite(e.ctx, transfer.ObjectAttrs{Name: "d"}, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteAt([]byte("doomed"), 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(e.ctx, "d", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteAt([]byte(" still writable"), 6); err != nil {
		t.Fatalf("write after delete: %v", err)
	}
	if got := d.Size(); got != int64(len("doomed still writable")) {
		t.Errorf("deleted file's own size %d", got)
	}
	if !d.Orphaned() || w.Orphaned() {
		t.Errorf("orphaned: d %v, w %v; want true, false", d.Orphaned(), w.Orphaned())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	e.flush(c)
	if got := string(e.object("b")); got != "one,two" {
		t.Errorf("b = %q", got)
	}
	for _, n := range []string{"a", "d"} {
		if _, err := e.b.Stat(e.ctx, n); !errors.Is(err, transfer.ErrNotExist) {
			t.Errorf("%s in the bucket: %v, want none", n, err)
		}
	}
}

// Handles the kernel never released (an unmount drops the release of a
// file closed just before it) must not keep a flush waiting forever:
// CloseWriters closes them, and the flush completes.
func TestCloseWritersUnblocksFlush(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(0)
	for _, hidden := range []bool{false, true} {
		name := fmt.Sprintf("left-open-%v", hidden)
		w, err := c.OpenWrite(e.ctx, transfer.ObjectAttrs{Name: name}, true, hidden)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.File().WriteAt([]byte("data"), 0); err != nil { // as the kernel would, or through WriteAt
			t.Fatal(err)
		}
		if !hidden {
			if _, err := w.WriteAt([]byte("data"), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(e.ctx, 300*time.Millisecond)
	left := c.Flush(ctx, nil)
	cancel()
	if len(left) != 2 {
		t.Fatalf("flush with the files still open left %v, want both", left)
	}
	if n := c.CloseWriters(); n != 2 {
		t.Errorf("CloseWriters closed %d, want 2", n)
	}
	e.flush(c)
	for _, n := range []string{"left-open-false", "left-open-true"} {
		if got := string(e.object(n)); got != "data" {
			t.Errorf("%s = %q", n, got)
		}
	}
}

// A name deleted or renamed away and written again is a new file: it
// does not inherit the old one's metadata (a symlink's target, a mode).
func TestRecreatedNameStartsWithoutOldMetadata(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	for _, how := range []string{"remove", "rename"} {
		name := "x-" + how
		e.write(c, transfer.ObjectAttrs{Name: name}, true, 0, nil)
		if err := c.SetMeta(e.ctx, transfer.ObjectAttrs{Name: name}, map[string]string{"gcsfuse_symlink_target": "t", "bucketfs-mode": "600"}); err != nil {
			t.Fatal(err)
		}
		if how == "remove" {
			if err := c.Remove(e.ctx, name, 0); err != nil {
				t.Fatal(err)
			}
		} else if _, err := c.Rename(e.ctx, transfer.ObjectAttrs{Name: name}, name+"-moved", 0); err != nil {
			t.Fatal(err)
		}
		e.write(c, transfer.ObjectAttrs{Name: name}, true, 0, []byte("regular"))
		if la, ok := c.Local(name); !ok || len(la.Metadata) != 0 {
			t.Errorf("%s: the new file has metadata %v (ok %v), want none", how, la.Metadata, ok)
		}
	}
	if la, ok := c.Local("x-rename-moved"); !ok || la.Metadata["gcsfuse_symlink_target"] != "t" {
		t.Errorf("the renamed file lost its metadata: %v", la.Metadata)
	}
}

// A removed directory's placeholder is deleted from the bucket after the
// files under it: while one of them is there, the directory would show
// again through it once the placeholder is gone.
func TestPlaceholderDeletedAfterTheFilesUnderIt(t *testing.T) {
	e := newEnv(t)
	e.put("d/", nil)
	fa := e.put("d/a", []byte("a"))
	fb := e.put("d/b", []byte("b"))
	var mu sync.Mutex
	var deletes []string
	e.emu.SetAfterHook(func(r *http.Request) {
		if r.Method == http.MethodDelete {
			mu.Lock()
			deletes = append(deletes, r.URL.Path)
			mu.Unlock()
		}
	})
	c := e.openWB(0)
	// The placeholder first, as rmdir after the unlinks would find it
	// queued first if the files' deletions were slower.
	if err := c.Remove(e.ctx, "d/a", fa.Generation); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(e.ctx, "d/b", fb.Generation); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(e.ctx, "d/", -1); err != nil {
		t.Fatal(err)
	}
	e.flush(c)
	mu.Lock()
	defer mu.Unlock()
	if len(deletes) != 3 || !strings.HasSuffix(deletes[2], "/o/d/") {
		t.Errorf("deletions in the order %q, want the placeholder d/ last", deletes)
	}
}

// setBeforeJoin runs f (once) when an open for writing of name is
// between the acquire of its entry and the handle's joining it.
func setBeforeJoin(t *testing.T, name string, f func()) {
	var once sync.Once
	testBeforeJoin = func(n string) {
		if n == name {
			once.Do(f)
		}
	}
	t.Cleanup(func() { testBeforeJoin = nil })
}

// TestCreateWhileDeletionSettles: a file is made again at a deleted name
// while the deletion reaches the bucket, whose end drops the entry the
// create is opening. The create must not join the dropped entry (every
// write failed: 'replaced in the cache while open for writing'; found by
// several processes creating and deleting the same names): it is made
// again at the name.
func TestCreateWhileDeletionSettles(t *testing.T) {
	e := newEnv(t)
	a := e.put("f", []byte("old"))
	c := e.openWB(time.Hour) // nothing is sent until the flush below
	if err := c.Remove(e.ctx, "f", a.Generation); err != nil {
		t.Fatal(err)
	}
	setBeforeJoin(t, "f", func() {
		e.flush(c) // the deletion reaches the bucket and settles now
	})
	e.write(c, transfer.ObjectAttrs{Name: "f"}, true, 0, []byte("new"))
	e.flush(c)
	if got := e.object("f"); string(got) != "new" {
		t.Errorf("f = %q, want the new file", got)
	}
}

// TestOpenWriteWhileRemoved: an existing file is deleted while it is
// being opened for writing. The open counts as made after the deletion
// (ErrStale, with ErrLeftName): joining the deletion, its first write
// brought the name back.
func TestOpenWriteWhileRemoved(t *testing.T) {
	e := newEnv(t)
	a := e.put("f", []byte("old"))
	c := e.openWB(time.Hour)
	setBeforeJoin(t, "f", func() {
		if err := c.Remove(e.ctx, "f", a.Generation); err != nil {
			t.Error(err)
		}
	})
	w, err := c.OpenWrite(e.ctx, a, false, false)
	if err == nil {
		w.WriteAt([]byte("X"), 0)
		w.Close()
		t.Fatal("OpenWrite of a file deleted meanwhile succeeded")
	}
	if !errors.Is(err, ErrStale) || !errors.Is(err, ErrLeftName) {
		t.Errorf("OpenWrite: %v, want ErrStale and ErrLeftName", err)
	}
	if _, ok := c.Local("f"); ok {
		t.Error("the deleted name shows a local file")
	}
	e.flush(c)
	if _, err := e.b.Stat(e.ctx, "f"); !errors.Is(err, transfer.ErrNotExist) {
		t.Errorf("f after the flush: %v, want deleted", err)
	}
}

// TestLocalSubdirsMatchesLocalNames: after random writes, removals and
// flushes of names in a small tree, LocalSubdirs (which walks the index
// of directories, localdirs.go) says what LocalNames' names say, for
// every directory, and after LocalNames has dropped names clean again.
func TestLocalSubdirsMatchesLocalNames(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	rng := rand.New(rand.NewPCG(7, 11))
	segs := []string{"a", "a-b", "b", "c"}
	var names, dirs []string
	for _, x := range segs {
		dirs = append(dirs, x+"/")
		names = append(names, x, x+"/")
		for _, y := range segs {
			dirs = append(dirs, x+"/"+y+"/")
			names = append(names, x+"/"+y, x+"/"+y+"/", x+"/"+y+"/z")
		}
	}
	dirs = append(dirs, "")
	want := func(prefix string) (present, removed []string) {
		p, r := c.LocalNames(prefix)
		made := map[string]bool{}
		for _, n := range p {
			if rest := n[len(prefix):]; strings.Contains(rest, "/") {
				made[rest[:strings.IndexByte(rest, '/')]] = true
			}
		}
		for _, n := range p {
			if rest := n[len(prefix):]; strings.Contains(rest, "/") && !slices.Contains(present, rest[:strings.IndexByte(rest, '/')]) {
				present = append(present, rest[:strings.IndexByte(rest, '/')])
			}
		}
		for _, n := range r {
			if rest := n[len(prefix):]; strings.Count(rest, "/") == 1 && strings.HasSuffix(rest, "/") && !made[rest[:len(rest)-1]] {
				removed = append(removed, rest[:len(rest)-1])
			}
		}
		return present, removed
	}
	for round := range 12 {
		for range 30 {
			n := names[rng.IntN(len(names))]
			if rng.IntN(3) == 0 {
				_ = c.Remove(e.ctx, n, -1) // may be absent: nothing to check
			} else {
				e.write(c, transfer.ObjectAttrs{Name: n}, true, 0, []byte(n))
			}
		}
		if round%4 == 3 {
			e.flush(c)
		}
		for _, d := range dirs {
			gotP, gotR := c.LocalSubdirs(d)
			wantP, wantR := want(d)
			for _, l := range [][]string{gotP, gotR, wantP, wantR} {
				slices.Sort(l) // "a-b" sorts before "a/": the order is not the point
			}
			if !slices.Equal(gotP, wantP) || !slices.Equal(gotR, wantR) {
				t.Fatalf("round %d: LocalSubdirs(%q) = %v, %v; the names say %v, %v", round, d, gotP, gotR, wantP, wantR)
			}
		}
	}
}

// An fsync through a hidden handle whose file was deleted meanwhile (an
// orphan) succeeds, whatever size the kernel wrote: nothing of it is
// recorded or uploaded. Only its close says the file is too big (as
// before the write handle's I/O moved to package internal/write, whose
// Sync went on to check the size after an orphan's Record).
func TestOrphanSyncIgnoresSize(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	w, err := c.OpenWrite(e.ctx, transfer.ObjectAttrs{Name: "huge"}, true, true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := c.Remove(e.ctx, "huge", 0); err != nil {
		t.Fatal(err)
	}
	if !w.Orphaned() {
		t.Fatal("the handle is not orphaned by the deletion")
	}
	// As the kernel would (passthrough), sparse.
	if err := w.File().Truncate(MaxObjectSize + 1); err != nil {
		t.Skipf("no sparse file past the largest object here: %v", err)
	}
	if err := w.Sync(); err != nil {
		t.Errorf("fsync of an orphan: %v, want nil", err)
	}
	if err := w.CheckSize(); !errors.Is(err, ErrTooBig) {
		t.Errorf("its close's check: %v, want ErrTooBig", err)
	}
	if err := w.File().Truncate(0); err != nil {
		t.Fatal(err)
	}
}
