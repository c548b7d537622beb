package cache

import (
	"os"
	"testing"
	"time"
)

// TestMain runs every test of the package with the cache's invariants
// (state.go) checked whenever Cache.mu is released.
func TestMain(m *testing.M) {
	checkInvariants = true
	os.Exit(m.Run())
}

// TestInvariantsCatchBreakage: checkInvariantsLocked holds on a cache in
// use, and reports each kind of damage done to it (so that the checks
// every test runs can fail).
func TestInvariantsCatchBreakage(t *testing.T) {
	e := newEnv(t)
	clean, changed := pattern(objSize, 61), pattern(objSize, 62)
	ac, ach := e.put("clean", clean), e.put("changed", changed)
	c := e.openWB(time.Hour)
	e.cacheAll(c, ac, clean)
	e.write(c, ach, false, 0, []byte("x"))

	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkInvariantsLocked(); err != nil {
		t.Fatalf("a sound cache breaks an invariant: %v", err)
	}
	ec, ech := c.entries["clean"], c.entries["changed"]
	if ec == nil || ech == nil || !ech.rec.Dirty {
		t.Fatal("the entries are not there, or the changed one is clean")
	}
	breakages := []struct {
		what          string
		break_, mend_ func()
	}{
		{"a charge not counted in used", func() { ec.charged++ }, func() { ec.charged-- }},
		{"an entry out of the LRU list", func() { c.lru.Remove(ec.elem) }, func() { ec.elem = c.lru.PushFront(ec) }},
		{"an indexed entry marked dropped", func() { ec.dropped = true }, func() { ec.dropped = false }},
		{"a dirty name out of the overlay", func() {
			c.overlay.Prune("changed", func(n string) bool { return n != "changed" })
		}, func() { c.markLocalLocked("changed") }},
		{"a writer without a handle", func() { ech.writers++ }, func() { ech.writers-- }},
		{"a hold nobody keeps", func() { c.holds["clean"]++ }, func() { delete(c.holds, "clean") }},
		{"a clean entry with dirtySince", func() { ec.dirtySince = time.Now() }, func() { ec.dirtySince = time.Time{} }},
	}
	for _, b := range breakages {
		b.break_()
		err := c.checkInvariantsLocked()
		b.mend_()
		if err == nil {
			t.Errorf("%s: not reported", b.what)
		} else {
			t.Logf("%s: %v", b.what, err)
		}
		if err := c.checkInvariantsLocked(); err != nil {
			t.Fatalf("after mending %s: %v", b.what, err)
		}
	}
}
