package names

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// duringRefreshOf runs fn once, while the bucket's answer to the refresh
// of name is on its way (after the bucket made it, before the cache has
// it): a change of this mount confirmed in that instant.
func (e *env) duringRefreshOf(name string, fn func()) (ran func() bool) {
	return e.during(func(r *http.Request) bool {
		return r.Method == http.MethodGet && r.URL.Query().Get("prefix") == name+"/"
	}, fn)
}

// during runs fn once, after the bucket answered the first request that
// match accepts and before the answer leaves.
func (e *env) during(match func(r *http.Request) bool, fn func()) (ran func() bool) {
	var once sync.Once
	done := false
	var mu sync.Mutex
	e.emu.SetAfterHook(func(r *http.Request) {
		if !match(r) {
			return
		}
		once.Do(func() {
			fn()
			mu.Lock()
			done = true
			mu.Unlock()
		})
	})
	e.t.Cleanup(func() { e.emu.SetAfterHook(nil) })
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		return done
	}
}

// A background refresh of a name asked before this mount removed that
// directory (its placeholder deletion confirmed while the refresh was on
// its way) must not bring the directory back: the answer predates the
// change.
func TestRefreshDoesNotResurrectARemovedDirectory(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.put("d/", "")
	if c, _ := e.resolve("d"); c.Kind != Dir {
		t.Fatalf("d is %v; want a directory", c.Kind)
	}
	e.clock.advance(2 * time.Minute)
	ran := e.duringRefreshOf("d", func() {
		if err := e.emu.Delete(bucketName, "d/"); err != nil {
			t.Error(err)
		}
		e.m.Confirmed("d/", transfer.ObjectAttrs{}, true) // rmdir d, uploaded
	})
	if c, _ := e.resolve("d"); c.Kind != Dir || !c.Stale {
		t.Fatalf("past the TTL d is %+v; want the known directory, stale", c)
	}
	e.settle()
	if !ran() {
		t.Fatal("the hook did not run")
	}
	if c, n := e.resolve("d"); c.Kind != None {
		t.Errorf("after its removal was confirmed, d is %v (after %d requests); want nothing: a refresh asked before the removal brought it back", c.Kind, n)
	}
}

// The same for a directory made here: a refresh of its name asked before
// the mkdir reached the bucket must not hide it.
func TestRefreshDoesNotHideAMadeDirectory(t *testing.T) {
	e := newEnv(t, time.Minute)
	if c, _ := e.resolve("n"); c.Kind != None {
		t.Fatalf("n is %v; want nothing", c.Kind)
	}
	e.clock.advance(2 * time.Minute)
	ran := e.duringRefreshOf("n", func() {
		a := e.put("n/", "")
		e.m.Confirmed("n/", a, false) // mkdir n, uploaded
	})
	if c, _ := e.resolve("n"); c.Kind != None || !c.Stale {
		t.Fatalf("past the TTL n is %+v; want the known nothing, stale", c)
	}
	e.settle()
	if !ran() {
		t.Fatal("the hook did not run")
	}
	if c, n := e.resolve("n"); c.Kind != Dir {
		t.Errorf("after its mkdir was confirmed, n is %v (after %d requests); want a directory: a refresh asked before hid it", c.Kind, n)
	}
}

// A refresh of a directory's placeholder asked before the directory was
// moved (DirMoved, a bucket that renames folders) must not bring back
// the placeholder DirMoved dropped.
func TestRefreshDoesNotKeepAMovedPlaceholder(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.put("d/", "")
	if _, ok, _ := e.dirAttrs("d/"); !ok {
		t.Fatal("d/ has no placeholder")
	}
	e.clock.advance(2 * time.Minute)
	ran := e.during(func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/o/d/")
	}, func() {
		if err := e.emu.Delete(bucketName, "d/"); err != nil {
			t.Error(err)
		}
		e.put("e/", "")
		e.m.DirMoved("d/", "e/")
	})
	if _, ok, _ := e.dirAttrs("d/"); !ok {
		t.Fatal("past the TTL d/ has no placeholder; want the known one")
	}
	e.settle()
	if !ran() {
		t.Fatal("the hook did not run")
	}
	if _, ok, n := e.dirAttrs("d/"); ok {
		t.Errorf("after d/ moved, d/ has a placeholder (after %d requests); want none: a refresh asked before the move kept it", n)
	}
}
