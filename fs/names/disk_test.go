package names

import (
	"bytes"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// reopen closes e's Cache and opens a new one on the same names.db with
// options o, as a remount does.
func (e *env) reopen(o Options) {
	e.t.Helper()
	e.m.Close()
	e.m = Open(e.b, e.local, o)
	e.m.now = e.clock.now
	e.t.Cleanup(e.m.Close)
}

// logBuffer collects a logger's lines.
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

func diskOptions(t *testing.T, dir string, log *logBuffer) Options {
	o := Options{TTL: time.Minute, Dir: dir, Bucket: bucketName}
	if log != nil {
		o.Logger = slog.New(slog.NewTextHandler(log, nil))
	}
	return o
}

// What was learned survives a close and an open of names.db: entries
// (negative ones too), listings and placeholders answer without a
// request, within the TTL as within one mount, and past it at once.
func TestNamesPersistAcrossOpens(t *testing.T) {
	dir := t.TempDir()
	e := newEnvWith(t, diskOptions(t, dir, nil))
	f := e.put("d/f", "one")
	e.put("d/sub/", "")
	e.put("d/sub/x", "x")
	e.resolve("d/f")
	e.resolve("nope")
	e.list("d/")
	e.list("d/sub/")
	e.dirAttrs("d/sub/")

	e.reopen(diskOptions(t, dir, nil))
	check := func(when string) {
		t.Helper()
		if c, n := e.resolve("d/f"); c.Kind != File || c.Attrs.Generation != f.Generation || n != 0 {
			t.Errorf("%s: d/f is %+v after %d requests; want generation %d, no request", when, c, n, f.Generation)
		}
		if c, n := e.resolve("nope"); c.Kind != None || n != 0 {
			t.Errorf("%s: nope is %v after %d requests; want None, no request", when, c.Kind, n)
		}
		if l, n := e.list("d/"); !slices.Equal(l.Names(), []string{"f", "sub"}) || n != 0 {
			t.Errorf("%s: d/ lists %v after %d requests; want [f sub], no request", when, l.Names(), n)
		}
		if l, n := e.list("d/sub/"); !slices.Equal(l.Names(), []string{"x"}) || n != 0 {
			t.Errorf("%s: d/sub/ lists %v after %d requests; want [x], no request", when, l.Names(), n)
		}
		if _, ok, n := e.dirAttrs("d/sub/"); !ok || n != 0 {
			t.Errorf("%s: the placeholder of d/sub/: %v after %d requests; want it, no request", when, ok, n)
		}
	}
	check("within the TTL")
	e.reopen(diskOptions(t, dir, nil))
	e.clock.advance(time.Hour)
	// A refresh blocked on a bucket that does not answer: the known
	// answers still come at once.
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		<-r.Context().Done()
		return http.StatusServiceUnavailable, true
	})
	t.Cleanup(func() { e.emu.SetHook(nil) })
	start := time.Now()
	if c, _ := e.resolve("d/f"); c.Attrs.Generation != f.Generation {
		t.Errorf("past the TTL with the bucket away: d/f is %+v", c)
	}
	if l, _ := e.list("d/"); !slices.Equal(l.Names(), []string{"f", "sub"}) {
		t.Errorf("past the TTL with the bucket away: d/ lists %v", l.Names())
	}
	if _, ok, _ := e.dirAttrs("d/sub/"); !ok {
		t.Error("past the TTL with the bucket away: the placeholder of d/sub/ is gone")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("known answers with the bucket away took %v", d)
	}
}

// Changes made in memory reach names.db, drops too: a name forgotten
// (Stale) before the close is not answered from the file after it.
func TestDropsReachNamesDB(t *testing.T) {
	dir := t.TempDir()
	e := newEnvWith(t, diskOptions(t, dir, nil))
	e.put("d/f", "one")
	e.put("d/s/x", "x")
	e.list("d/")
	e.list("d/s/")
	e.m.Stale("d/f")
	e.m.ForgetUnder("d/s/")
	e.reopen(diskOptions(t, dir, nil))
	// d/s/ first: a listing of d/ lists its subdirectories ahead (ahead.go).
	if _, n := e.list("d/s/"); n == 0 {
		t.Error("d/s/ (dropped by ForgetUnder) was listed from names.db")
	}
	if _, n := e.list("d/"); n == 0 {
		t.Error("d/ (dropped by Stale) was listed from names.db")
	}
}

// The working set in memory is bounded: directories that leave it are
// loaded again from names.db, with no request; a drop made while a
// directory is out of memory (queued, perhaps not yet written) is not
// undone by its load.
func TestWorkingSetIsLoadedByDirectory(t *testing.T) {
	e := newEnvWith(t, diskOptions(t, t.TempDir(), nil))
	e.m.mu.Lock()
	e.m.known.memNames = 4
	e.m.mu.Unlock()
	for _, d := range []string{"a/", "b/", "c/"} {
		e.put(d+"1", "x")
		e.put(d+"2", "x")
		e.list(d)
	}
	e.m.mu.Lock()
	resident, held := len(e.m.known.groups), e.m.known.names
	e.m.mu.Unlock()
	if resident > 2 || held > 4+3 {
		t.Errorf("%d groups holding %d names in memory; want at most 2 near the bound of 4", resident, held)
	}
	if l, n := e.list("a/"); !slices.Equal(l.Names(), []string{"1", "2"}) || n != 0 {
		t.Errorf("a/ (out of memory) lists %v after %d requests; want [1 2] from names.db", l.Names(), n)
	}
	e.list("c/") // a/ leaves memory again
	e.m.Stale("a/1")
	if _, n := e.list("a/"); n == 0 {
		t.Error("a/, dropped while out of memory, was loaded from names.db")
	}
}

// names.db is bounded: past MaxNames, the least recently used
// directories leave it.
func TestNamesDBIsBounded(t *testing.T) {
	o := diskOptions(t, t.TempDir(), nil)
	o.MaxNames = 20
	e := newEnvWith(t, o)
	for i := range 10 {
		d := string(rune('a'+i)) + "/"
		for j := range 4 {
			e.put(d+string(rune('0'+j)), "x")
		}
		e.list(d)
	}
	e.reopen(o) // the writer drained: its evictions are done
	d := e.m.known.disk
	d.rw.RLock()
	defer d.rw.RUnlock()
	var stored int
	err := d.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(namesKey).ForEach(func(k, v []byte) error {
			stored += count(v)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if stored > o.MaxNames || stored == 0 {
		t.Errorf("names.db holds %d names; want some, at most %d", stored, o.MaxNames)
	}
}

// A damaged names.db, or one of another bucket, is moved aside with one
// warning, and the cache works without it; HasNamespace says what a
// file holds without keeping it open.
func TestBadNamesDBIsMovedAside(t *testing.T) {
	dir := t.TempDir()
	if ok, err := HasNamespace(dir, bucketName); ok || err != nil {
		t.Fatalf("HasNamespace with no names.db: %v, %v", ok, err)
	}
	if err := os.WriteFile(filepath.Join(dir, DBName), bytes.Repeat([]byte("not bbolt "), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := HasNamespace(dir, bucketName); err == nil {
		t.Error("HasNamespace of a damaged names.db: no error")
	}
	log := &logBuffer{}
	e := newEnvWith(t, diskOptions(t, dir, log))
	if got := strings.Count(log.String(), "level=WARN"); got != 1 {
		t.Errorf("%d warnings for a damaged names.db, want 1:\n%s", got, log.String())
	}
	aside, _ := filepath.Glob(filepath.Join(dir, DBName+".bad-*"))
	if len(aside) != 1 {
		t.Errorf("moved aside: %v, want one file", aside)
	}
	e.put("d/f", "x")
	e.list("d/")
	e.m.Close()
	if ok, err := HasNamespace(dir, bucketName); !ok || err != nil {
		t.Errorf("HasNamespace after a mount: %v, %v; want true", ok, err)
	}
	if ok, err := HasNamespace(dir, "another-bucket"); ok || err != nil {
		t.Errorf("HasNamespace for another bucket: %v, %v; want false", ok, err)
	}
	// Another bucket's names are not used: moved aside, started afresh.
	o := diskOptions(t, dir, log)
	o.Bucket = "another-bucket"
	other := Open(e.b, e.local, o)
	other.now = e.clock.now
	defer other.Close()
	before := e.emu.Requests()
	if _, err := other.List(e.ctx, "d/", e.warn); err != nil {
		t.Fatal(err)
	}
	if e.emu.Requests() == before {
		t.Error("a names.db of another bucket answered a listing")
	}
}

// Issue 18 item 3: a listing that shows a newer version of a name than
// the entry held for it wins at once, and the name is noted as changed
// (so that the kernel drops what it holds of it).
func TestNewerListingWinsOverAnOlderEntry(t *testing.T) {
	e := newEnv(t, time.Minute)
	var mu sync.Mutex
	var noted []string
	e.m.OnChange(func(name string) {
		mu.Lock()
		noted = append(noted, name)
		mu.Unlock()
	})
	e.put("d/f", "one")
	e.resolve("d/f")
	v2 := e.put("d/f", "two, written by another client")
	e.list("d/")
	if c, n := e.resolve("d/f"); c.Attrs.Generation != v2.Generation || n != 0 {
		t.Errorf("after a listing showed generation %d, d/f resolves to %d (after %d requests)", v2.Generation, c.Attrs.Generation, n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := slices.Contains(noted, "d/f")
		mu.Unlock()
		if got {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("d/f was not noted as changed")
		}
		time.Sleep(time.Millisecond) // polling a condition, with a deadline
	}
}

// A refresh that fails keeps the known answer.
func TestRefreshFailureKeepsTheKnownAnswer(t *testing.T) {
	e := newEnv(t, time.Minute)
	f := e.put("d/f", "one")
	e.list("d/")
	e.emu.Fault(bucketName, http.StatusForbidden)
	t.Cleanup(func() { e.emu.Fault(bucketName, 0) })
	e.clock.advance(2 * time.Minute)
	if c, _ := e.resolve("d/f"); c.Attrs.Generation != f.Generation {
		t.Fatalf("past the TTL, bucket failing: %+v", c)
	}
	e.settle()
	if c, _ := e.resolve("d/f"); c.Attrs.Generation != f.Generation {
		t.Errorf("after a failed refresh: %+v, want the known answer", c)
	}
}

// After a mount that did not close names.db (a crash), what it holds is
// asked again before it is used, even within the TTL (its last changes
// may never have been written), and used only if the bucket does not
// answer.
func TestNamesAfterACrashAreRefreshed(t *testing.T) {
	dir := t.TempDir()
	e := newEnvWith(t, diskOptions(t, dir, nil))
	e.put("d/f", "one")
	e.list("d/")
	e.m.Close()
	db, err := bolt.Open(filepath.Join(dir, DBName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(metaKey).Delete(cleanKey) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	e.put("d/g", "made while the mount was down")
	e.reopen(diskOptions(t, dir, nil))
	e.emu.Fault(bucketName, http.StatusForbidden)
	if l, _ := e.list("d/"); !slices.Equal(l.Names(), []string{"f"}) {
		t.Errorf("d/ after a crash, the bucket refusing, lists %v; want the known [f]", l.Names())
	}
	if c, _ := e.resolve("d/f"); c.Kind != File {
		t.Errorf("d/f after a crash, the bucket refusing: %v; want the known File", c.Kind)
	}
	e.emu.Fault(bucketName, 0)
	if l, n := e.list("d/"); !slices.Equal(l.Names(), []string{"f", "g"}) || n == 0 {
		t.Errorf("d/ after a crash lists %v (%d requests); want [f g], asked", l.Names(), n)
	}
}

// crash removes names.db's clean marker, as a mount that never closed it
// leaves the file.
func crash(t *testing.T, dir string) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, DBName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(metaKey).Delete(cleanKey) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
}

// What a crashed mount left in names.db stays unverified after the next
// mount closes the file cleanly without using it: the mount after that
// asks again too (the clean marker said nothing of records it did not
// write).
func TestNamesAfterACrashStayUnverifiedAcrossACleanMount(t *testing.T) {
	dir := t.TempDir()
	e := newEnvWith(t, diskOptions(t, dir, nil))
	e.put("d/f", "one")
	e.put("x/y", "y")
	e.list("d/")
	e.m.Close()
	crash(t, dir)
	e.put("d/g", "made while the mount was down")

	e.reopen(diskOptions(t, dir, nil)) // uses x/ only, closes cleanly
	e.list("x/")
	e.reopen(diskOptions(t, dir, nil))
	if l, n := e.list("d/"); !slices.Equal(l.Names(), []string{"f", "g"}) || n == 0 {
		t.Errorf("d/, written before a crash, lists %v (%d requests) two mounts later; want [f g], asked", l.Names(), n)
	}
	// What the clean mount wrote itself is trusted.
	if l, n := e.list("x/"); !slices.Equal(l.Names(), []string{"y"}) || n != 0 {
		t.Errorf("x/, written by a clean mount, lists %v (%d requests); want [y], no request", l.Names(), n)
	}
}

// A crashed mount's listing that the next mount changed (a confirmed
// upload into it) without asking the bucket is still unverified when
// written back: the mount after that asks again.
func TestACrashedListingChangedWithoutAskingStaysUnverified(t *testing.T) {
	dir := t.TempDir()
	e := newEnvWith(t, diskOptions(t, dir, nil))
	e.put("d/f", "one")
	e.list("d/")
	e.m.Close()
	crash(t, dir)
	e.put("d/g", "made while the mount was down")

	e.reopen(diskOptions(t, dir, nil))
	h := e.put("d/h", "uploaded by this mount")
	e.m.Confirmed("d/h", h, false)
	e.reopen(diskOptions(t, dir, nil))
	if l, n := e.list("d/"); !slices.Equal(l.Names(), []string{"f", "g", "h"}) || n == 0 {
		t.Errorf("d/, listed before a crash and changed since without asking, lists %v (%d requests); want [f g h], asked", l.Names(), n)
	}
}
