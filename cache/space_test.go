package cache

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/space"
	"github.com/bucketfs/bucketfs/transfer"
)

// No file grows past MaxFileSize: a write that starts at the limit, a
// truncation and an allocation past it fail with ErrTooBig and change
// nothing; a write across it is cut short there.
func TestFileSizeLimit(t *testing.T) {
	e := newEnv(t)
	const max = 8 * chunk
	c := e.open(max)
	w, err := c.OpenWrite(e.ctx, transfer.ObjectAttrs{Name: "f"}, true, false)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteAt([]byte("x"), max); !errors.Is(err, ErrTooBig) {
		t.Errorf("write at the limit: %v, want ErrTooBig", err)
	}
	if err := w.Truncate(max + 1); !errors.Is(err, ErrTooBig) {
		t.Errorf("truncate past the limit: %v, want ErrTooBig", err)
	}
	if err := w.Allocate(0, max+1); !errors.Is(err, ErrTooBig) {
		t.Errorf("allocate past the limit: %v, want ErrTooBig", err)
	}
	if w.Size() != 0 {
		t.Fatalf("size %d after refused changes, want 0", w.Size())
	}
	n, err := w.WriteAt(pattern(2*chunk, 1), max-chunk)
	if err != nil || n != chunk {
		t.Errorf("write across the limit: %d, %v; want %d bytes written", n, err, chunk)
	}
	if w.Size() != max {
		t.Errorf("size %d, want %d", w.Size(), max)
	}
	if err := w.Allocate(0, max); err != nil {
		t.Errorf("allocate up to the limit: %v", err)
	}
	if s := c.Stats(); s.UsedBytes > max {
		t.Errorf("used %d bytes, over the %d cap", s.UsedBytes, max)
	}
	if c.MaxFileSize() != max {
		t.Errorf("MaxFileSize %d, want %d", c.MaxFileSize(), max)
	}
	budget, err := space.New(t.TempDir(), 1<<50, 0)
	if err != nil {
		t.Fatal(err)
	}
	big := &Cache{opts: Options{MaxSize: 1 << 50}, budget: budget}
	if big.MaxFileSize() != MaxObjectSize {
		t.Errorf("MaxFileSize of a 1 PiB cache is %d, want the 5 TiB object limit", big.MaxFileSize())
	}
}

// fallocate grows a file like a write: the new bytes read as zeros and
// count against the cap; the file is uploaded with its new size.
func TestAllocateGrowsFile(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(0)
	w, err := c.OpenWrite(e.ctx, transfer.ObjectAttrs{Name: "g"}, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("head"), 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Allocate(2, 3*chunk); err != nil {
		t.Fatal(err)
	}
	if w.Size() != 3*chunk+2 {
		t.Errorf("size %d, want %d", w.Size(), 3*chunk+2)
	}
	w.Close()
	e.flush(c)
	want := append([]byte("head"), make([]byte, 3*chunk+2-4)...)
	if got := e.object("g"); !bytes.Equal(got, want) {
		t.Errorf("bucket holds %d bytes, want %d (head, then zeros)", len(got), len(want))
	}
}

// Writers running at once never take the cache over its cap together:
// each reserves its growth before it writes.
func TestConcurrentWritersStayUnderCap(t *testing.T) {
	e := newEnv(t)
	const max = 16 * chunk
	o := e.opts(max)
	o.FullWait = 50 * time.Millisecond
	o.WriteBackDelay = time.Hour
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var over []int64
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := c.OpenWrite(e.ctx, transfer.ObjectAttrs{Name: "w" + string(rune('a'+i))}, true, false)
			if err != nil {
				t.Error(err)
				return
			}
			defer w.Close()
			for off := int64(0); off < 4*chunk; off += chunk / 2 {
				if _, err := w.WriteAt(pattern(chunk/2, uint32(i)), off); err != nil {
					if !errors.Is(err, ErrNoSpace) {
						t.Error(err)
					}
					return
				}
				if u := c.Stats().UsedBytes; u > max {
					mu.Lock()
					over = append(over, u)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(over) > 0 {
		t.Errorf("used went over the %d cap %d times (up to %d)", max, len(over), slices.Max(over))
	}
	if u := c.Stats().UsedBytes; u > max {
		t.Errorf("used %d after the writers closed, over the cap %d", u, max)
	}
}

// When changed files come near the cap, they are sent at once, whatever
// the write-back delay.
func TestDirtyNearCapUploadsNow(t *testing.T) {
	e := newEnv(t)
	const max = 10 * chunk
	o := e.opts(max)
	o.WriteBackDelay = time.Hour
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	e.write(c, transfer.ObjectAttrs{Name: "a"}, true, 0, pattern(4*chunk, 1))
	e.write(c, transfer.ObjectAttrs{Name: "b"}, true, 0, pattern(4*chunk, 2))
	if s := c.Stats(); s.DirtyFiles != 2 {
		t.Fatalf("%d dirty files at 80%% of the cap, want 2 (nothing sent yet)", s.DirtyFiles)
	}
	e.write(c, transfer.ObjectAttrs{Name: "c"}, true, 0, pattern(chunk+chunk/2, 3)) // 95%
	deadline := time.Now().Add(20 * time.Second)
	for c.Stats().DirtyFiles > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("changed files at 95%% of the cap still wait for their 1h delay: %+v", c.Stats())
		}
		c.mu.Lock()
		wake := c.changed
		c.mu.Unlock()
		select {
		case <-wake:
		case <-time.After(100 * time.Millisecond):
		}
	}
	for name, seed := range map[string]uint32{"a": 1, "b": 2} {
		if !bytes.Equal(e.object(name), pattern(4*chunk, seed)) {
			t.Errorf("bucket's %s differs from what was written", name)
		}
	}
}

// logBuffer collects a cache's log.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// breakJournal makes every journal append fail, as a full disk does;
// the returned function mends it.
func breakJournal(c *Cache) func() {
	c.j.SetBroken(errors.New("no space left on device (test)"))
	return func() {
		c.j.SetBroken(nil)
	}
}

// A deletion that cannot be recorded fails and leaves no trace: the
// object stays in the bucket, and the name is not shown as deleted.
func TestFailedRemoveLeavesNoTrace(t *testing.T) {
	for _, cached := range []bool{false, true} {
		name := map[bool]string{false: "uncached", true: "cached"}[cached]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			a := e.put("obj", pattern(objSize, 1))
			c := e.openWB(0)
			if cached {
				e.cacheAll(c, a, pattern(objSize, 1))
			}
			mend := breakJournal(c)
			if err := c.Remove(e.ctx, "obj", a.Generation); err == nil {
				t.Fatal("Remove with a broken journal succeeded")
			}
			mend()
			if _, removed := c.LocalNames(""); len(removed) > 0 {
				t.Errorf("the failed deletion shows: removed %v", removed)
			}
			e.flush(c)
			if got := e.object("obj"); !bytes.Equal(got, pattern(objSize, 1)) {
				t.Errorf("the object changed after a failed deletion: %d bytes", len(got))
			}
			if cached {
				e.cacheAll(c, a, pattern(objSize, 1))
			} else if s := c.Stats(); s.Entries != 0 || s.UsedBytes != 0 {
				t.Errorf("the failed deletion left %d entries, %d bytes", s.Entries, s.UsedBytes)
			}
		})
	}
}

// A new file whose record cannot be written fails cleanly: no
// "refusing to remove" error for a file that never held a byte, and its
// budget comes back.
func TestFailedCreateLeavesNoTrace(t *testing.T) {
	e := newEnv(t)
	var log logBuffer
	o := e.opts(64 << 20)
	o.Logger = slog.New(slog.NewTextHandler(&log, nil))
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mend := breakJournal(c)
	if _, err := c.OpenWrite(e.ctx, transfer.ObjectAttrs{Name: "new"}, true, false); err == nil {
		t.Fatal("OpenWrite of a new file with a broken journal succeeded")
	}
	mend()
	if strings.Contains(log.String(), "refusing to remove") {
		t.Errorf("bogus refusal logged:\n%s", log.String())
	}
	if s := c.Stats(); s.Entries != 0 || s.UsedBytes != 0 || s.DirtyFiles != 0 {
		t.Errorf("after the failed create: %+v", s)
	}
	if present, _ := c.LocalNames(""); len(present) > 0 {
		t.Errorf("the failed create shows: %v", present)
	}
	e.write(c, transfer.ObjectAttrs{Name: "new"}, true, 0, []byte("ok"))
	e.flush(c)
	if got := e.object("new"); string(got) != "ok" {
		t.Errorf("bucket holds %q", got)
	}
}

// Under the disk's free-space floor, clean copies are evicted (changed
// ones stay), and an object that would take the disk under it is read
// uncached.
func TestFreeSpaceFloorEvictsClean(t *testing.T) {
	e := newEnv(t)
	var objs []transfer.ObjectAttrs
	for i := range 3 {
		objs = append(objs, e.put("clean"+string(rune('0'+i)), pattern(objSize, uint32(i))))
	}
	o := e.opts(64 << 20)
	o.WriteBackDelay = time.Hour
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range objs {
		e.cacheAll(c, a, pattern(objSize, uint32(i)))
	}
	e.write(c, transfer.ObjectAttrs{Name: "dirty"}, true, 0, pattern(chunk, 9))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	o.MinFree = 1 << 62 // more than any disk has: always under the floor
	o.FullWait = 50 * time.Millisecond
	// The changed file stays changed (the next start sends it at once).
	e.emu.SetHook(func(r *http.Request) (int, bool) { return 503, isUpload(r) })
	c, err = Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if names := entryNames(c); len(names) != 1 || names[0] != "dirty" {
		t.Errorf("entries under the floor: %v, want only the changed file", names)
	}
	before := c.Stats().Uncached
	e.cacheAll(c, objs[0], pattern(objSize, 0))
	if s := c.Stats(); s.Uncached != before+1 || s.Entries != 1 {
		t.Errorf("an open under the floor was cached: %+v", s)
	}
	e.mustHaveLocal(c, map[string][]byte{"dirty": pattern(chunk, 9)})
	w, err := c.OpenWrite(e.ctx, transfer.ObjectAttrs{Name: "grow"}, true, false)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteAt([]byte("x"), 0); !errors.Is(err, ErrNoSpace) {
		t.Errorf("a write under the floor: %v, want ErrNoSpace", err)
	}
	e.emu.SetHook(nil)
	w.Close()
	e.flush(c)
	if got := e.object("dirty"); !bytes.Equal(got, pattern(chunk, 9)) {
		t.Errorf("the changed file reached the bucket with %d bytes", len(got))
	}
}

// A change of metadata that cannot be recorded fails and leaves no
// trace: nothing is sent, the name shows no local change.
func TestFailedSetMetaLeavesNoTrace(t *testing.T) {
	e := newEnv(t)
	a := e.put("obj", pattern(objSize, 1))
	c := e.openWB(0)
	e.cacheAll(c, a, pattern(objSize, 1))
	mend := breakJournal(c)
	if err := c.SetMeta(e.ctx, a, map[string]string{"bucketfs-mode": "600"}); err == nil {
		t.Fatal("SetMeta with a broken journal succeeded")
	}
	mend()
	if _, ok := c.Local("obj"); ok {
		t.Error("the failed change shows as a local change")
	}
	e.flush(c)
	if got, err := e.b.Stat(e.ctx, "obj"); err != nil || got.Metadata["bucketfs-mode"] != "" || got.Generation != a.Generation {
		t.Errorf("the object changed after a failed SetMeta: %+v, %v", got, err)
	}
}
