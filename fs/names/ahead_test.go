package names

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// waitAhead waits until no directory is listed ahead or queued.
func (e *env) waitAhead() {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		e.m.mu.Lock()
		idle := e.m.ahead.running == 0 && len(e.m.ahead.queue) == 0
		e.m.mu.Unlock()
		if idle {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatal("directories still listed ahead after 20 s")
		}
		time.Sleep(5 * time.Millisecond) // background work of the Cache: nothing to wait on
	}
}

// A listing an application asks for has its subdirectories listed in the
// background: the walk finds them known (no request), and only one level
// ahead (their own subdirectories wait until they are listed).
func TestSubdirectoriesListedAhead(t *testing.T) {
	e := newEnv(t, time.Minute)
	for i := range 20 {
		e.put(fmt.Sprintf("t/d%02d/f", i), "x")
		e.put(fmt.Sprintf("t/d%02d/deeper/g", i), "y")
	}
	var mu sync.Mutex
	asked := map[string]int{} // listings asked of the bucket, by prefix
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		if p := r.URL.Query().Get("prefix"); r.URL.Query().Has("delimiter") {
			mu.Lock()
			asked[p]++
			mu.Unlock()
		}
		return 0, false
	})
	e.list("t/")
	e.waitAhead()
	for i := range 20 {
		p := fmt.Sprintf("t/d%02d/", i)
		mu.Lock()
		before := asked[p]
		mu.Unlock()
		l, _ := e.list(p) // (it lists p's own subdirectories ahead: not counted)
		mu.Lock()
		n := asked[p] - before
		mu.Unlock()
		if before != 1 || n != 0 || l.Len() != 2 {
			t.Fatalf("%s: listed %d times ahead, %d times when asked for; %d names; want once ahead, none then, 2 names", p, before, n, l.Len())
		}
	}
	e.waitAhead()
	e.m.mu.Lock()
	_, deeper := e.m.known.listing("t/d00/deeper/")
	e.m.mu.Unlock()
	if !deeper {
		t.Error("t/d00/deeper/ was not listed ahead once t/d00/ was listed")
	}
	e.m.mu.Lock()
	_, top := e.m.known.listing("")
	e.m.mu.Unlock()
	if top {
		t.Error("the root was listed, which nothing asked for: ahead goes down, not up")
	}
}

// Nothing is listed ahead of a listing no application asked for (a
// refresh), and a Cache that closes stops listing ahead.
func TestListAheadStopsAtClose(t *testing.T) {
	e := newEnv(t, time.Minute)
	for i := range 50 {
		e.put(fmt.Sprintf("t/d%02d/f", i), "x")
	}
	e.list("t/")
	e.m.Close() // waits for the workers; must not hang or panic
	e.m.mu.Lock()
	running := e.m.ahead.running
	e.m.mu.Unlock()
	if running != 0 {
		t.Errorf("%d workers still running after Close", running)
	}
}
