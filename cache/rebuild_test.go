package cache

import (
	"bytes"
	"crypto/rand"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/recovery"
	"github.com/bucketfs/bucketfs/transfer"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// damageCase leaves a crashed cache with changes not yet uploaded in
// every kind of state, and returns what the bucket must hold once they
// are (nil: the object must not exist).
func (e *env) damageCase() map[string][]byte {
	e.t.Helper()
	c := e.openWB(time.Hour)
	want := map[string][]byte{}

	old := e.put("old", pattern(objSize, 1))
	changed := pattern(objSize+17, 2)
	e.write(c, old, false, 0, changed)
	want["old"] = changed

	fresh := pattern(3*chunk+5, 3)
	e.write(c, transfer.ObjectAttrs{Name: "dir/new"}, true, 0, fresh)
	want["dir/new"] = fresh

	gone := e.put("gone", pattern(100, 4))
	if err := c.Remove(e.ctx, "gone", gone.Generation); err != nil {
		e.t.Fatal(err)
	}
	want["gone"] = nil

	src := e.put("src", pattern(objSize, 5))
	if _, err := c.Rename(e.ctx, src, "dst", 0); err != nil {
		e.t.Fatal(err)
	}
	want["src"], want["dst"] = nil, pattern(objSize, 5)

	moved := pattern(2*chunk, 6)
	e.write(c, transfer.ObjectAttrs{Name: "a"}, true, 0, moved)
	if _, err := c.Rename(e.ctx, transfer.ObjectAttrs{Name: "a"}, "b", 0); err != nil {
		e.t.Fatal(err)
	}
	want["a"], want["b"] = nil, moved

	clean := e.put("clean", pattern(objSize, 7))
	e.cacheAll(c, clean, pattern(objSize, 7))
	want["clean"] = pattern(objSize, 7)

	// Enough records for several index pages.
	for i := range 40 {
		name := "many/" + strconv.Itoa(i)
		data := pattern(100+i, uint32(100+i))
		e.write(c, transfer.ObjectAttrs{Name: name}, true, 0, data)
		want[name] = data
	}
	if err := c.j.Update(nil); err != nil { // into bbolt, as after a checkpoint
		e.t.Fatal(err)
	}
	c.crash()
	return want
}

// checkBucket flushes c and checks the bucket against want.
func (e *env) checkBucket(c *Cache, want map[string][]byte) {
	e.t.Helper()
	e.flush(c)
	for name, data := range want {
		if data == nil {
			if _, err := e.b.Stat(e.ctx, name); !errors.Is(err, transfer.ErrNotExist) {
				e.t.Errorf("%s: %v, want deleted", name, err)
			}
			continue
		}
		if got := e.object(name); !bytes.Equal(got, data) {
			e.t.Errorf("%s: the bucket has %d bytes, want the %d written", name, len(got), len(data))
		}
	}
}

func (e *env) lostFound() []string {
	des, err := os.ReadDir(filepath.Join(e.dir, recovery.LostFoundDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// holdUploads holds every upload request at the emulator until release
// is called (at the latest when the test ends). started is closed when
// the first one arrives. A cache opened on changes left by a crash sends
// them at once (index re-queues them with no delay), so a test that asks
// whether a recovered change is still local must hold its upload: else
// the answer depends on how fast the upload is.
func (e *env) holdUploads() (started <-chan struct{}, release func()) {
	first, gate := make(chan struct{}), make(chan struct{})
	var arrived, released sync.Once
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		if !isUpload(r) {
			return 0, false
		}
		arrived.Do(func() { close(first) })
		select {
		case <-gate:
			return 0, false // on to the bucket
		case <-r.Context().Done():
			return http.StatusServiceUnavailable, true
		}
	})
	release = func() {
		released.Do(func() {
			e.emu.SetHook(nil)
			close(gate)
		})
	}
	e.t.Cleanup(release)
	return first, release
}

// TestLostIndexRebuilt: with index.db and the journal deleted after a
// crash, every change not yet uploaded comes back from the data files'
// descriptions and reaches the bucket; nothing goes to lost+found.
func TestLostIndexRebuilt(t *testing.T) {
	e := newEnv(t)
	want := e.damageCase()
	for _, f := range []string{"index.db", durable.JournalName} {
		if err := os.Remove(filepath.Join(e.dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	_, release := e.holdUploads()
	c := e.openWB(time.Hour)
	if _, ok := c.Local("dir/new"); !ok {
		t.Error("dir/new is not a local change after the rebuild")
	}
	release()
	e.checkBucket(c, want)
	if lf := e.lostFound(); len(lf) != 0 {
		t.Errorf("lost+found = %v, want empty", lf)
	}
}

// TestCorruptIndexRebuilt: a damaged index.db (random bytes, truncated,
// damaged pages) makes no panic: it is moved aside and rebuilt, and no
// change is lost.
func TestCorruptIndexRebuilt(t *testing.T) {
	damage := map[string]func(t *testing.T, path string){
		"random": func(t *testing.T, path string) {
			st, _ := os.Stat(path)
			buf := make([]byte, st.Size())
			rand.Read(buf)
			if err := os.WriteFile(path, buf, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"truncated": func(t *testing.T, path string) {
			st, _ := os.Stat(path)
			if err := os.Truncate(path, st.Size()/3); err != nil {
				t.Fatal(err)
			}
		},
		"pages": func(t *testing.T, path string) {
			// The meta pages stay valid; every other page is garbage.
			st, _ := os.Stat(path)
			buf := make([]byte, st.Size()-2*4096)
			rand.Read(buf)
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(buf, 2*4096); err != nil {
				t.Fatal(err)
			}
		},
		"one page": func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			junk := bytes.Repeat([]byte{0xff}, 4096)
			if _, err := f.WriteAt(junk, 4*4096); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			want := e.damageCase()
			fn(t, filepath.Join(e.dir, "index.db"))
			c := e.openWB(time.Hour)
			aside, _ := filepath.Glob(filepath.Join(e.dir, "index.db.corrupt-*"))
			if name != "one page" && len(aside) != 1 {
				// (A damaged page bbolt never reads may go unnoticed.)
				t.Errorf("index.db.corrupt-* = %v, want the damaged index moved aside", aside)
			}
			e.checkBucket(c, want)
			if lf := e.lostFound(); len(lf) != 0 {
				t.Errorf("lost+found = %v, want empty", lf)
			}
		})
	}
}

// TestUndescribedFileGoesToLostFound: a data file without a record and
// without a description is moved to lost+found with a note, never
// deleted; an empty one is removed.
func TestUndescribedFileGoesToLostFound(t *testing.T) {
	e := newEnv(t)
	c := e.open(1 << 20)
	c.Close()
	data := filepath.Join(e.dir, "data")
	if err := os.WriteFile(filepath.Join(data, "ffff"), []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(data, "fffe"))
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(1 << 16) // sparse: no bytes
	f.Close()
	e.open(1 << 20)
	if got := dataFiles(t, e.dir); len(got) != 0 {
		t.Errorf("data/ = %v, want empty", got)
	}
	if got, want := e.lostFound(), []string{"ffff", "ffff.json"}; !slices.Equal(got, want) {
		t.Fatalf("lost+found = %v, want %v", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(e.dir, recovery.LostFoundDir, "ffff")); string(b) != "precious" {
		t.Errorf("lost+found/ffff = %q", b)
	}
}

// TestRenameLinkWindow: a crash between a rename's hard link and its
// journal entry leaves a second link that no record names; with the index
// lost too, the bytes stay under the name the description gives, and the
// extra link goes.
func TestRenameLinkWindow(t *testing.T) {
	for _, lose := range []bool{false, true} {
		t.Run("index lost "+strconv.FormatBool(lose), func(t *testing.T) {
			e := newEnv(t)
			c := e.openWB(time.Hour)
			data := pattern(objSize, 9)
			e.write(c, transfer.ObjectAttrs{Name: "f"}, true, 0, data)
			c.mu.Lock()
			id := c.entries["f"].Rec.ID
			c.mu.Unlock()
			c.crash()
			link := durable.DataPath(filepath.Join(e.dir, "data"), id+5)
			if err := os.Link(durable.DataPath(filepath.Join(e.dir, "data"), id), link); err != nil {
				t.Fatal(err)
			}
			if lose {
				os.Remove(filepath.Join(e.dir, "index.db"))
				os.Remove(filepath.Join(e.dir, durable.JournalName))
			}
			c2 := e.openWB(time.Hour)
			if exists(link) {
				t.Error("the extra link is still there")
			}
			e.checkBucket(c2, map[string][]byte{"f": data})
			if lf := e.lostFound(); len(lf) != 0 {
				t.Errorf("lost+found = %v, want empty", lf)
			}
			next := c2.j.PeekID()
			if next <= id+5 {
				t.Errorf("next ID %d would reuse a file's ID %d", next, id+5)
			}
		})
	}
}

// TestTwoFilesClaimOneName: after the index is lost, the newer file
// (higher ID) of a name wins; the other goes to lost+found.
func TestTwoFilesClaimOneName(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	e.write(c, transfer.ObjectAttrs{Name: "n"}, true, 0, []byte("older"))
	c.mu.Lock()
	id := c.entries["n"].Rec.ID
	c.mu.Unlock()
	c.crash()
	dataDir := filepath.Join(e.dir, "data")
	newer := durable.DataPath(dataDir, id+1)
	if err := os.WriteFile(newer, []byte("newer"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := durable.SetDescription(newer, -1, durable.Description{V: 1, ID: id + 1, Name: "n", Dirty: true, Size: 5}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(e.dir, "index.db"))
	os.Remove(filepath.Join(e.dir, durable.JournalName))
	c2 := e.openWB(time.Hour)
	e.checkBucket(c2, map[string][]byte{"n": []byte("newer")})
	old := strconv.FormatUint(id, 16)
	if got, want := e.lostFound(), []string{old, old + ".json"}; !slices.Equal(got, want) {
		t.Errorf("lost+found = %v, want %v", got, want)
	}
}

// TestFsck: fsck reports a lost index's changes, refuses a cache in use,
// and rebuilds a damaged index.
func TestFsck(t *testing.T) {
	e := newEnv(t)
	want := e.damageCase()
	if _, err := Fsck(e.dir, FsckOptions{}); err != nil {
		t.Fatalf("fsck of a crashed cache: %v", err)
	}
	os.WriteFile(filepath.Join(e.dir, "index.db"), []byte("not a bbolt file, not at all, no no"), 0o600)
	rep, err := Fsck(e.dir, FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.IndexDamage == "" || !slices.Contains(rep.WouldAdopt, "dir/new") || len(rep.WouldLostFound) != 0 {
		t.Errorf("fsck of a damaged index: %+v", rep)
	}
	rep, err = Fsck(e.dir, FsckOptions{Rebuild: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.MovedAside == "" || rep.Rebuilt < len(want)-2 { // clean copies and the renamed names' old files are not records
		t.Errorf("fsck --rebuild: %+v", rep)
	}
	rep, err = Fsck(e.dir, FsckOptions{})
	if err != nil || rep.IndexDamage != "" || len(rep.WouldAdopt) != 0 {
		t.Errorf("fsck after the rebuild: %+v, %v", rep, err)
	}
	c := e.openWB(time.Hour)
	if _, err := Fsck(e.dir, FsckOptions{}); !errors.Is(err, ErrCacheInUse) {
		t.Errorf("fsck of a cache in use: %v, want ErrCacheInUse", err)
	}
	if _, err := Fsck(e.dir, FsckOptions{Rebuild: true}); !errors.Is(err, ErrCacheInUse) {
		t.Errorf("fsck --rebuild of a cache in use: %v, want ErrCacheInUse", err)
	}
	if old, _ := filepath.Glob(filepath.Join(e.dir, "index.db.old-*")); len(old) != 0 {
		t.Errorf("fsck --rebuild moved the index of a cache in use: %v", old)
	}
	if used, err := InUse(e.dir); !used || err != nil {
		t.Errorf("InUse of a cache in use: %v, %v; want true", used, err)
	}
	e.checkBucket(c, want)
}

// InUse is false for a directory with no index, and for a closed cache.
func TestInUseOfClosedCache(t *testing.T) {
	e := newEnv(t)
	if used, err := InUse(e.dir); used || err != nil {
		t.Errorf("InUse of an empty directory: %v, %v", used, err)
	}
	c := e.openWB(time.Hour)
	if used, err := InUse(e.dir); !used || err != nil {
		t.Errorf("InUse of an open cache: %v, %v; want true", used, err)
	}
	c.Close()
	if used, err := InUse(e.dir); used || err != nil {
		t.Errorf("InUse of a closed cache: %v, %v; want false", used, err)
	}
}

// TestUndescribedRecordsGetDescribed: a start describes the files of its
// records that carry no description (a cache made before descriptions),
// so that a later loss of the index keeps them.
func TestUndescribedRecordsGetDescribed(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	data := pattern(objSize, 11)
	e.write(c, transfer.ObjectAttrs{Name: "x"}, true, 0, data)
	c.mu.Lock()
	path := c.dataPath(c.entries["x"].Rec.ID)
	c.mu.Unlock()
	c.crash()
	if err := unix.Removexattr(path, durable.DescribeAttr); err != nil {
		t.Fatal(err)
	}
	e.openWB(time.Hour).crash()
	os.Remove(filepath.Join(e.dir, "index.db"))
	os.Remove(filepath.Join(e.dir, durable.JournalName))
	e.checkBucket(e.openWB(time.Hour), map[string][]byte{"x": data})
}

// TestCorruptIndexAfterCleanStop: after a clean stop the index is not
// checked at open, but damage met while opening or loading it is handled
// the same way: moved aside, rebuilt, nothing lost.
func TestCorruptIndexAfterCleanStop(t *testing.T) {
	damage := map[string]func(t *testing.T, path string){
		"pages": func(t *testing.T, path string) {
			st, _ := os.Stat(path)
			junk := make([]byte, st.Size()-2*4096)
			rand.Read(junk)
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			f.WriteAt(junk, 2*4096)
		},
		"bad record": func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			err = db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("objects")).Put([]byte("kept/7"), []byte("{not json"))
			})
			if err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.emu.SetHook(func(r *http.Request) (int, bool) { return 503, isUpload(r) })
			c := e.openWB(0)
			want := map[string][]byte{}
			for i := range 60 {
				name := "kept/" + strconv.Itoa(i)
				want[name] = pattern(50+i, uint32(i))
				e.write(c, transfer.ObjectAttrs{Name: name}, true, 0, want[name])
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(e.dir, "index.db")
			fn(t, path)
			e.emu.SetHook(nil)
			c2 := e.openWB(time.Hour)
			if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) != 1 {
				t.Errorf("index.db.corrupt-* = %v, want the damaged index moved aside", aside)
			}
			e.checkBucket(c2, want)
		})
	}
}

// TestDescriptions: a changed file's description says what a rebuild
// needs; a clean copy's is its ID alone, short enough to stay inside an
// ext4 inode.
func TestDescriptions(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	a := e.put("obj", pattern(objSize, 12))
	e.cacheAll(c, a, pattern(objSize, 12))
	c.mu.Lock()
	path := c.dataPath(c.entries["obj"].Rec.ID)
	c.mu.Unlock()
	buf := make([]byte, 4096)
	n, err := unix.Getxattr(path, durable.DescribeAttr, buf)
	if err != nil || n > 40 {
		t.Fatalf("clean copy's description: %q, %v; want at most 40 bytes", buf[:max(n, 0)], err)
	}
	e.write(c, a, false, 0, []byte("changed"))
	d, err := durable.ReadDescription(path)
	if err != nil || d == nil || d.Name != "obj" || !d.Dirty || d.Generation != a.Generation {
		t.Errorf("changed file's description: %+v, %v", d, err)
	}
}

// TestOpenErrorNamesFsck: a cache whose state cannot be opened fails
// with an error that names the command that repairs it.
func TestOpenErrorNamesFsck(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(filepath.Join(e.dir, durable.JournalName, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Open(e.opts(1<<20), e.b)
	var se *StateError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "bucketfs fsck --cache-dir "+e.dir) {
		t.Errorf("Open with a broken journal: %v, want a StateError naming fsck", err)
	}
}

// TestOversizedDescription: custom metadata too big for an extended
// attribute is left out of the description (Partial), and the changed
// file is still recovered after the index is lost: a local change while
// its upload is in flight, then in the bucket, whole.
func TestOversizedDescription(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	data := pattern(5000, 13)
	e.write(c, transfer.ObjectAttrs{Name: "big-meta"}, true, 0, data)
	huge := strings.Repeat("x", 70<<10) // over any filesystem's 64 KiB limit
	if err := c.SetMeta(e.ctx, transfer.ObjectAttrs{Name: "big-meta"}, map[string]string{"huge": huge}); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	path := c.dataPath(c.entries["big-meta"].Rec.ID)
	c.mu.Unlock()
	d, err := durable.ReadDescription(path)
	if err != nil || d == nil || !d.Partial || d.Name != "big-meta" || !d.Dirty || d.Meta != nil {
		t.Fatalf("description: %+v, %v; want a partial one", d, err)
	}
	c.crash()
	os.Remove(filepath.Join(e.dir, "index.db"))
	os.Remove(filepath.Join(e.dir, durable.JournalName))
	// The reopened cache sends the recovered change at once; hold it in
	// flight, so that Local is asked before the upload ends, every time.
	started, release := e.holdUploads()
	c2 := e.openWB(time.Hour)
	select {
	case <-started:
	case <-e.ctx.Done():
		t.Fatal("the recovered change was never sent")
	}
	if la, ok := c2.Local("big-meta"); !ok || la.Size != int64(len(data)) {
		t.Errorf("after the rebuild: %+v, %v; want the changed file", la, ok)
	}
	// Then the order the test used to meet by chance: the upload done
	// before Local is asked. The change is in the bucket, no longer local.
	release()
	e.flush(c2)
	if got := e.object("big-meta"); !bytes.Equal(got, data) {
		t.Errorf("the bucket has %d bytes of big-meta, want the %d written", len(got), len(data))
	}
	if la, ok := c2.Local("big-meta"); ok {
		t.Errorf("after the upload: %+v is still a local change", la)
	}
}
