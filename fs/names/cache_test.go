package names

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/transfer"
)

// These tests run the cache against the in-process GCS emulator, through
// the real transfer.GCS client, with a fake overlay of local changes and
// a clock the test moves (the TTL passes without waiting).

const bucketName = "names-test"

// clock is a time the test sets; Confirmed may read it from a request's
// goroutine (an emulator hook), hence the lock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// overlay is a cache's local changes: files written here (present) and
// names deleted here (removed; a directory's placeholder ends in '/').
type overlay struct {
	mu      sync.Mutex
	present map[string]transfer.ObjectAttrs
	removed map[string]bool
	onLocal func(name string) // if set, runs first in Local, without mu
}

func newOverlay() *overlay {
	return &overlay{present: map[string]transfer.ObjectAttrs{}, removed: map[string]bool{}}
}

func (o *overlay) Local(name string) (transfer.ObjectAttrs, bool) {
	if o.onLocal != nil {
		o.onLocal(name)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	a, ok := o.present[name]
	return a, ok
}

func (o *overlay) LocalSubdirs(prefix string) (present, removed []string) {
	p, rm := o.LocalNames(prefix)
	return subdirsOf(prefix, p, rm)
}

func (o *overlay) LocalNames(prefix string) (present, removed []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for n := range o.present {
		if strings.HasPrefix(n, prefix) {
			present = append(present, n)
		}
	}
	for n := range o.removed {
		if strings.HasPrefix(n, prefix) {
			removed = append(removed, n)
		}
	}
	sort.Strings(present)
	sort.Strings(removed)
	return present, removed
}

// env is an emulator, a bucket client for it, and a Cache over both.
type env struct {
	t     *testing.T
	ctx   context.Context
	emu   *emulator.Server
	b     *transfer.GCS
	clock *clock
	local *overlay
	m     *Cache

	mu     sync.Mutex
	warned []string // guarded by mu: names warn was called for
}

func newEnv(t *testing.T, ttl time.Duration) *env {
	t.Helper()
	return newEnvWith(t, Options{TTL: ttl})
}

// newEnvWith is newEnv with the Cache's options o.
func newEnvWith(t *testing.T, o Options) *env {
	t.Helper()
	return newEnvOn(t, o, emulator.Options{Buckets: []string{bucketName}})
}

// newEnvOn is newEnvWith on an emulator started with eo.
func newEnvOn(t *testing.T, o Options, eo emulator.Options) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	emu, err := emulator.Start(eo)
	if err != nil {
		t.Fatalf("starting emulator: %v", err)
	}
	t.Cleanup(emu.Close)
	b, err := transfer.NewGCS(ctx, bucketName, transfer.GCSOptions{Endpoint: emu.URL(), Anonymous: true})
	if err != nil {
		t.Fatalf("NewGCS: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	e := &env{t: t, ctx: ctx, emu: emu, b: b, clock: &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, local: newOverlay()}
	e.m = Open(b, e.local, o)
	e.m.now = e.clock.now
	t.Cleanup(e.m.Close)
	return e
}

// settle waits until no refresh is in flight.
func (e *env) settle() {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		e.m.mu.Lock()
		n := len(e.m.bg.inflight)
		e.m.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d refreshes still in flight after 20s", n)
		}
		time.Sleep(time.Millisecond) // polling a condition, with a deadline
	}
}

// put stores data as name in the bucket and returns its attributes.
func (e *env) put(name, data string) transfer.ObjectAttrs {
	e.t.Helper()
	if _, err := e.emu.Put(bucketName, name, []byte(data)); err != nil {
		e.t.Fatalf("emulator put %s: %v", name, err)
	}
	a, err := e.b.Stat(e.ctx, name)
	if err != nil {
		e.t.Fatalf("stat %s: %v", name, err)
	}
	return a
}

func (e *env) warn(name, msg string, args ...any) {
	e.mu.Lock()
	e.warned = append(e.warned, name)
	e.mu.Unlock()
}

func (e *env) warnedAbout(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(e.warned, name)
}

// resolve resolves name and reports how many requests it made.
func (e *env) resolve(name string) (Entry, int64) {
	e.t.Helper()
	before := e.emu.Requests()
	c, err := e.m.Resolve(e.ctx, name, e.warn)
	if err != nil {
		e.t.Fatalf("Resolve(%s): %v", name, err)
	}
	return c, e.emu.Requests() - before
}

// list lists prefix and reports how many requests it made.
func (e *env) list(prefix string) (*Listing, int64) {
	e.t.Helper()
	before := e.emu.Requests()
	l, err := e.m.List(e.ctx, prefix, e.warn)
	if err != nil {
		e.t.Fatalf("List(%q): %v", prefix, err)
	}
	return l, e.emu.Requests() - before
}

// dirAttrs asks for the placeholder of prefix and reports how many
// requests it made.
func (e *env) dirAttrs(prefix string) (transfer.ObjectAttrs, bool, int64) {
	e.t.Helper()
	before := e.emu.Requests()
	a, ok, err := e.m.DirAttrs(e.ctx, prefix)
	if err != nil {
		e.t.Fatalf("DirAttrs(%q): %v", prefix, err)
	}
	return a, ok, e.emu.Requests() - before
}

// A lookup is answered from memory for the TTL, and asked again after it:
// a change in the bucket shows once the TTL has passed, not before.
func TestLookupsAreRememberedForTheTTL(t *testing.T) {
	e := newEnv(t, time.Minute)
	v1 := e.put("d/f", "one")
	if c, n := e.resolve("d/f"); c.Kind != File || c.Attrs.Generation != v1.Generation || n == 0 {
		t.Fatalf("first lookup: %+v after %d requests; want generation %d, asked", c, n, v1.Generation)
	}
	v2 := e.put("d/f", "two, changed by another client")
	e.clock.advance(59 * time.Second)
	if c, n := e.resolve("d/f"); c.Attrs.Generation != v1.Generation || n != 0 {
		t.Errorf("lookup within the TTL: generation %d after %d requests; want %d from memory", c.Attrs.Generation, n, v1.Generation)
	}
	e.clock.advance(2 * time.Second)
	// Past the TTL: the known answer at once, asked again in the
	// background; the next lookup has the new one.
	if c, _ := e.resolve("d/f"); c.Attrs.Generation != v1.Generation {
		t.Errorf("lookup after the TTL: generation %d; want %d at once", c.Attrs.Generation, v1.Generation)
	}
	e.settle()
	if c, n := e.resolve("d/f"); c.Attrs.Generation != v2.Generation || n != 0 {
		t.Errorf("lookup after the refresh: generation %d after %d requests; want %d from memory", c.Attrs.Generation, n, v2.Generation)
	}
}

// With Strict, an answer past the TTL waits for the bucket (the old
// contract), for lookups, listings and placeholders.
func TestStrictWaitsForTheBucketPastTheTTL(t *testing.T) {
	e := newEnvWith(t, Options{TTL: time.Minute, Strict: true})
	v1 := e.put("d/f", "one")
	e.put("p/", "")
	e.resolve("d/f")
	e.list("d/")
	e.dirAttrs("p/")
	v2 := e.put("d/f", "two")
	e.put("d/g", "new")
	if err := e.emu.Delete(bucketName, "p/"); err != nil {
		t.Fatal(err)
	}
	if c, n := e.resolve("d/f"); c.Attrs.Generation != v1.Generation || n != 0 {
		t.Errorf("within the TTL: generation %d after %d requests; want %d from memory", c.Attrs.Generation, n, v1.Generation)
	}
	e.clock.advance(time.Minute)
	if l, n := e.list("d/"); !slices.Contains(l.Names(), "g") || n == 0 {
		t.Errorf("after the TTL d/ lists %v after %d requests; want g, asked", l.Names(), n)
	}
	if c, _ := e.resolve("d/f"); c.Attrs.Generation != v2.Generation {
		t.Errorf("after the TTL: generation %d; want %d", c.Attrs.Generation, v2.Generation)
	}
	if _, ok, n := e.dirAttrs("p/"); ok || n == 0 {
		t.Errorf("p/ after the TTL: exists %v after %d requests; want it gone, asked", ok, n)
	}
}

// A name the bucket does not have is remembered as absent for the TTL.
func TestNegativeLookups(t *testing.T) {
	e := newEnv(t, time.Minute)
	if c, n := e.resolve("nope"); c.Kind != None || n == 0 {
		t.Fatalf("lookup of a missing name: %+v after %d requests; want None, asked", c, n)
	}
	e.put("nope", "made elsewhere")
	if c, n := e.resolve("nope"); c.Kind != None || n != 0 {
		t.Errorf("second lookup within the TTL: %v after %d requests; want None from memory", c.Kind, n)
	}
	e.clock.advance(time.Minute)
	if c, _ := e.resolve("nope"); c.Kind != None {
		t.Errorf("lookup after the TTL: %v, want None at once (refreshed in the background)", c.Kind)
	}
	e.settle()
	if c, _ := e.resolve("nope"); c.Kind != File {
		t.Errorf("lookup after the refresh: %v, want the file made meanwhile", c.Kind)
	}
	// A directory only through objects under it is a directory.
	e.put("implicit/x", "")
	if c, _ := e.resolve("implicit"); c.Kind != Dir {
		t.Errorf("lookup of an implicit directory: %v, want Dir", c.Kind)
	}
}

// With TTL 0 nothing is remembered: every question goes to the bucket.
func TestTTLZeroAsksEveryTime(t *testing.T) {
	e := newEnv(t, 0)
	e.put("d/f", "x")
	for i := range 2 {
		if c, n := e.resolve("d/f"); c.Kind != File || n == 0 {
			t.Errorf("lookup %d: %v after %d requests; want File, asked", i, c.Kind, n)
		}
		if l, n := e.list("d/"); !slices.Equal(l.Names(), []string{"f"}) || n == 0 {
			t.Errorf("listing %d: %v after %d requests; want [f], asked", i, l.Names(), n)
		}
		if _, _, n := e.dirAttrs("d/"); n == 0 {
			t.Errorf("placeholder %d: answered from memory", i)
		}
	}
	e.put("d/g", "y")
	if l, _ := e.list("d/"); !slices.Equal(l.Names(), []string{"f", "g"}) {
		t.Errorf("listing after a change: %v, want [f g]", l.Names())
	}
}

// A listing shows one level: files, directories with or without a
// placeholder, a directory over a file of the same name; names that
// cannot be file names are left out with a warning. While it is fresh it
// answers lookups of its children and their placeholders.
func TestListingShowsOneLevel(t *testing.T) {
	e := newEnv(t, time.Minute)
	a := e.put("d/a", "file a")
	e.put("d/ph/", "")
	e.put("d/sub/c", "below")
	e.put("d/sub", "hidden by the directory")
	long := "d/" + strings.Repeat("x", MaxNameLen+1)
	e.put(long, "name too long")
	e.put(transfer.StagingPrefix+"part", "an upload's part")
	e.put("top", "")

	l, n := e.list("d/")
	if !slices.Equal(l.Names(), []string{"a", "ph", "sub"}) || n == 0 {
		t.Fatalf("d/ lists %v after %d requests; want [a ph sub]", l.Names(), n)
	}
	if c := l.Child("a"); c.Kind != File || c.Attrs.Generation != a.Generation || c.Attrs.Size != a.Size {
		t.Errorf("d/a listed as %+v, want generation %d size %d", c, a.Generation, a.Size)
	}
	if l.Child("ph").Kind != Dir || l.Child("sub").Kind != Dir || l.Child("nope").Kind != None {
		t.Errorf("kinds: ph %v, sub %v, nope %v; want Dir, Dir, None", l.Child("ph").Kind, l.Child("sub").Kind, l.Child("nope").Kind)
	}
	if !e.warnedAbout(long) || !e.warnedAbout("d/sub") {
		t.Errorf("warned about %v; want the long name and d/sub", e.warned)
	}
	if root, _ := e.list(""); !slices.Equal(root.Names(), []string{"d", "top"}) {
		t.Errorf("the root lists %v, want [d top] (the staging prefix hidden)", root.Names())
	}

	// The fresh listing answers for its children.
	for name, want := range map[string]Kind{"d/a": File, "d/ph": Dir, "d/sub": Dir, "d/nope": None} {
		if c, n := e.resolve(name); c.Kind != want || n != 0 {
			t.Errorf("lookup of %s: %v after %d requests; want %v from the listing", name, c.Kind, n, want)
		}
	}
	if _, ok, n := e.dirAttrs("d/ph/"); !ok || n != 0 {
		t.Errorf("placeholder of d/ph/: exists %v after %d requests; want it, from the listing", ok, n)
	}
	if _, ok, n := e.dirAttrs("d/sub/"); ok || n != 0 {
		t.Errorf("placeholder of d/sub/: exists %v after %d requests; want none, from the listing", ok, n)
	}
	// And is used until the TTL ends.
	e.put("d/b", "new")
	if l, n := e.list("d/"); slices.Contains(l.Names(), "b") || n != 0 {
		t.Errorf("within the TTL d/ lists %v after %d requests; want the cached listing", l.Names(), n)
	}
	e.clock.advance(time.Minute)
	// (Its refresh may have asked the bucket already: not counted.)
	if l, _ := e.list("d/"); slices.Contains(l.Names(), "b") {
		t.Errorf("after the TTL d/ lists %v; want the known listing at once", l.Names())
	}
	e.settle()
	if l, _ := e.list("d/"); !slices.Contains(l.Names(), "b") {
		t.Errorf("after the refresh d/ lists %v, want b too", l.Names())
	}
}

// Local changes not yet in the bucket show over what it says, in
// listings and lookups, without asking it.
func TestLocalChangesShowOverTheBucket(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.put("d/a", "deleted here")
	e.put("d/b", "kept")
	e.list("d/")
	e.local.mu.Lock()
	e.local.present["d/new"] = transfer.ObjectAttrs{Name: "d/new", Size: 5}
	e.local.present["d/newdir/f"] = transfer.ObjectAttrs{Name: "d/newdir/f", Size: 1}
	e.local.removed["d/a"] = true
	e.local.mu.Unlock()

	l, n := e.list("d/")
	if !slices.Equal(l.Names(), []string{"b", "new", "newdir"}) || n != 0 {
		t.Errorf("d/ lists %v after %d requests; want [b new newdir] from memory", l.Names(), n)
	}
	if c := l.Child("new"); c.Kind != File || c.Attrs.Size != 5 {
		t.Errorf("d/new listed as %+v, want the local file of 5 bytes", c)
	}
	if l.Child("newdir").Kind != Dir {
		t.Errorf("d/newdir listed as %v, want Dir", l.Child("newdir").Kind)
	}
	for name, want := range map[string]Kind{"d/new": File, "d/newdir": Dir, "d/a": None} {
		if c, n := e.resolve(name); c.Kind != want || n != 0 {
			t.Errorf("lookup of %s: %v after %d requests; want %v from the local changes", name, c.Kind, n, want)
		}
	}
}

// A directory's placeholder holds its attributes: what the bucket says,
// remembered for the TTL; the local version while it has changes; none
// for the root and for a directory that exists only through objects under
// it.
func TestDirAttrs(t *testing.T) {
	e := newEnv(t, time.Minute)
	ph, err := e.b.SetMetadata(e.ctx, "p/", e.put("p/", "").Generation, map[string]string{modeKey: "700"})
	if err != nil {
		t.Fatal(err)
	}
	e.put("q/f", "")

	if _, ok, n := e.dirAttrs(""); ok || n != 0 {
		t.Errorf("the root: exists %v after %d requests; want no object, not asked", ok, n)
	}
	if a, ok, _ := e.dirAttrs("p/"); !ok || a.Metadata[modeKey] != "700" || a.Generation != ph.Generation {
		t.Errorf("p/: %+v, %v; want the placeholder with mode 700", a, ok)
	}
	if _, ok, _ := e.dirAttrs("q/"); ok {
		t.Error("q/ (only objects under it) has a placeholder")
	}
	if err := e.emu.Delete(bucketName, "p/"); err != nil {
		t.Fatal(err)
	}
	if _, ok, n := e.dirAttrs("p/"); !ok || n != 0 {
		t.Errorf("p/ within the TTL: exists %v after %d requests; want the remembered placeholder", ok, n)
	}
	e.clock.advance(time.Minute)
	if _, ok, _ := e.dirAttrs("p/"); !ok {
		t.Error("p/ after the TTL: gone; want the known placeholder at once")
	}
	e.settle()
	if _, ok, n := e.dirAttrs("p/"); ok || n != 0 {
		t.Errorf("p/ after the refresh: exists %v after %d requests; want it gone", ok, n)
	}
	e.local.mu.Lock()
	e.local.present["p/"] = transfer.ObjectAttrs{Name: "p/", Metadata: map[string]string{modeKey: "750"}}
	e.local.mu.Unlock()
	if a, ok, n := e.dirAttrs("p/"); !ok || a.Metadata[modeKey] != "750" || n != 0 {
		t.Errorf("p/ with a local version: %+v, %v after %d requests; want mode 750, not asked", a, ok, n)
	}
}

// What the cache confirmed in the bucket wins over a listing asked for
// before: the remembered listing is changed (never asked again for it),
// a deletion takes the name away, a new file far below makes its
// directories appear, a placeholder's new attributes show.
func TestConfirmedChangesWinOverOlderListings(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.put("d/f", "old")
	e.put("d/g", "to be deleted")
	e.list("d/")
	e.list("")

	v2 := e.put("d/f", "uploaded by this cache")
	e.m.Confirmed("d/f", v2, false)
	l, n := e.list("d/")
	if c := l.Child("f"); c.Attrs.Generation != v2.Generation || n != 0 {
		t.Errorf("after a confirmed upload d/f is listed at generation %d after %d requests; want %d from memory", c.Attrs.Generation, n, v2.Generation)
	}
	if c, n := e.resolve("d/f"); c.Attrs.Generation != v2.Generation || n != 0 {
		t.Errorf("after a confirmed upload d/f resolves to generation %d after %d requests; want %d", c.Attrs.Generation, n, v2.Generation)
	}

	if err := e.emu.Delete(bucketName, "d/g"); err != nil {
		t.Fatal(err)
	}
	e.m.Confirmed("d/g", transfer.ObjectAttrs{}, true)
	if l, _ := e.list("d/"); slices.Contains(l.Names(), "g") {
		t.Errorf("after a confirmed deletion d/ lists %v", l.Names())
	}
	if c, n := e.resolve("d/g"); c.Kind != None || n != 0 {
		t.Errorf("after a confirmed deletion d/g is %v after %d requests; want None", c.Kind, n)
	}

	deep := e.put("e/x/y", "new, below new directories")
	e.m.Confirmed("e/x/y", deep, false)
	if root, n := e.list(""); !slices.Contains(root.Names(), "e") || n != 0 {
		t.Errorf("after a confirmed upload of e/x/y the root lists %v after %d requests; want e too", root.Names(), n)
	}

	// A directory made here: its placeholder, confirmed, is in the
	// remembered listing of its parent (files are also corrected by the
	// recent confirmations; placeholders only by this).
	nd := e.put("d/nd/", "")
	e.m.Confirmed("d/nd/", nd, false)
	if l, n := e.list("d/"); l.Child("nd").Kind != Dir || n != 0 {
		t.Errorf("after a confirmed placeholder d/nd/ the listing of d/ holds %v after %d requests; want nd", l.Names(), n)
	}

	ph := e.put("d/", "")
	ph.Metadata = map[string]string{modeKey: "711"}
	e.m.Confirmed("d/", ph, false)
	if a, ok, n := e.dirAttrs("d/"); !ok || a.Metadata[modeKey] != "711" || n != 0 {
		t.Errorf("after a confirmed placeholder change d/ has %+v, %v after %d requests; want mode 711", a, ok, n)
	}
}

// A change confirmed while a listing is on its way (the bucket answered
// before the change was made) must show in that listing and in the one
// remembered afterwards: the listing is made again.
func TestAListingDuringAConfirmationShowsIt(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.put("d/f", "")
	var once sync.Once
	var g transfer.ObjectAttrs
	e.emu.SetAfterHook(func(r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Query().Get("prefix") != "d/" {
			return
		}
		once.Do(func() {
			// The answer holds no d/g; the upload ends now.
			gen, err := e.emu.Put(bucketName, "d/g", []byte("g"))
			if err != nil {
				t.Error(err)
				return
			}
			g = transfer.ObjectAttrs{Name: "d/g", Generation: gen, Size: 1}
			e.m.Confirmed("d/g", g, false)
		})
	})
	l, _ := e.list("d/")
	e.emu.SetAfterHook(nil)
	if g.Generation == 0 {
		t.Fatal("the hook did not run")
	}
	if c := l.Child("g"); c.Kind != File {
		t.Errorf("d/ lists %v: the file confirmed while it was listed is missing", l.Names())
	}
	if l, n := e.list("d/"); l.Child("g").Kind != File || n != 0 {
		t.Errorf("the remembered listing of d/ holds %v (after %d requests), want g", l.Names(), n)
	}
}

// TestAListingWhileUploadsEndShowsThem lists a directory while its new
// files' uploads keep ending: each file leaves the overlay (after it was
// confirmed) between the overlay's list of names and the look at the file
// itself, and another file is written meanwhile. The listing changes on
// every try, so List gives up retrying; still no file may be missing.
// Before, a file confirmed in that gap was in neither the overlay nor the
// changes read just before (TestPOSIX/readdir/many once listed 499 of
// 500 new files).
func TestAListingWhileUploadsEndShowsThem(t *testing.T) {
	e := newEnv(t, time.Hour)
	e.put("d/a", "")
	e.list("d/")
	file := func(i int) string { return fmt.Sprintf("d/n%d", i) }
	e.local.present[file(0)] = transfer.ObjectAttrs{Name: file(0), Size: 1}
	next := 0
	e.local.onLocal = func(name string) {
		if name != file(next) {
			return
		}
		// Its upload ends: confirmed, then out of the overlay, where
		// the next new file is now.
		e.clock.advance(time.Millisecond)
		e.m.Confirmed(name, transfer.ObjectAttrs{Name: name, Generation: int64(next + 1), Size: 1}, false)
		e.local.mu.Lock()
		delete(e.local.present, name)
		next++
		e.local.present[file(next)] = transfer.ObjectAttrs{Name: file(next), Size: 1}
		e.local.mu.Unlock()
	}
	l, n := e.list("d/")
	e.local.onLocal = nil
	if next < 4 {
		t.Fatalf("%d uploads ended during the listing: the test wants one per try of List", next)
	}
	for i := 0; i < next; i++ {
		if l.Child(fmt.Sprintf("n%d", i)).Kind != File {
			t.Errorf("d/ lists %v (after %d requests): n%d, confirmed while listed, is missing", l.Names(), n, i)
		}
	}
}

// Forget drops a lookup and keeps the listing; Stale drops the listing of
// the name's directory too; ForgetUnder and DirMoved drop what is known
// under a renamed directory.
func TestForgetting(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.put("d/f", "")
	e.put("d/s/x", "")
	e.resolve("d/f")
	e.list("d/")
	e.list("d/s/")

	e.m.Forget("d/f")
	if _, n := e.resolve("d/f"); n != 0 {
		t.Errorf("after Forget, a lookup made %d requests; want the listing to answer", n)
	}
	e.m.Stale("d/f")
	if _, n := e.list("d/"); n == 0 {
		t.Error("after Stale, d/ was listed from memory")
	}
	e.m.ForgetUnder("d/s/")
	if _, n := e.list("d/s/"); n == 0 {
		t.Error("after ForgetUnder, d/s/ was listed from memory")
	}
	e.list("")
	e.m.DirMoved("d/", "e/")
	if _, n := e.list(""); n == 0 {
		t.Error("after DirMoved, the root was listed from memory")
	}
}

// Past the TTL, a storm of lookups answered from one directory's listing
// refreshes that listing once, not once per name.
func TestOneRefreshPerListing(t *testing.T) {
	e := newEnv(t, time.Minute)
	for i := range 50 {
		e.put(fmt.Sprintf("d/f%02d", i), "x")
	}
	e.list("d/")
	e.clock.advance(2 * time.Minute)
	before := e.emu.Requests()
	for i := range 50 {
		if c, _ := e.resolve(fmt.Sprintf("d/f%02d", i)); c.Kind != File {
			t.Fatalf("d/f%02d: %v", i, c.Kind)
		}
	}
	e.settle()
	if n := e.emu.Requests() - before; n != 1 {
		t.Errorf("50 lookups past the TTL made %d requests; want 1 (the listing's refresh)", n)
	}
}

// Subdirs counts the directories of a known listing (from the bucket,
// kept up to date by confirmed changes) with the local changes over it,
// and asks nobody: unknown before the listing, and with TTL 0.
func TestSubdirs(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.put("d/a/", "")
	e.put("d/b/x", "an implicit directory")
	e.put("d/f", "a file")
	if n, ok := e.m.Subdirs("d/"); ok {
		t.Errorf("before any listing: %d, known; want not known", n)
	}
	e.list("d/")
	if n, ok := e.m.Subdirs("d/"); n != 2 || !ok {
		t.Errorf("listed: %d, %v; want 2, known", n, ok)
	}
	// Local changes: a new directory, one over the file's name (shown
	// as a directory), one removed, one written under a known one.
	e.local.mu.Lock()
	e.local.present["d/new/"] = transfer.ObjectAttrs{Name: "d/new/"}
	e.local.present["d/f/g"] = transfer.ObjectAttrs{Name: "d/f/g"}
	e.local.present["d/b/y"] = transfer.ObjectAttrs{Name: "d/b/y"}
	e.local.removed["d/a/"] = true
	e.local.mu.Unlock()
	if n, ok := e.m.Subdirs("d/"); n != 3 || !ok {
		t.Errorf("with local changes: %d, %v; want 3 (b, new, f), known", n, ok)
	}
	if l, _ := e.list("d/"); !slices.Equal(l.Names(), []string{"b", "f", "new"}) || l.Child("f").Kind != Dir {
		t.Errorf("the listing shows %v (f: %v); want [b f new], f a directory, as Subdirs counts", l.Names(), l.Child("f").Kind)
	}
	// A directory confirmed in the bucket, the overlay empty again.
	e.local.mu.Lock()
	e.local.present, e.local.removed = map[string]transfer.ObjectAttrs{}, map[string]bool{}
	e.local.mu.Unlock()
	e.m.Confirmed("d/c/", e.put("d/c/", ""), false)
	if n, ok := e.m.Subdirs("d/"); n != 3 || !ok {
		t.Errorf("after a directory was confirmed: %d, %v; want 3 (a, b, c)", n, ok)
	}
	if n, ok := newEnv(t, 0).m.Subdirs(""); ok {
		t.Errorf("TTL 0: %d, known; want not known", n)
	}
}
