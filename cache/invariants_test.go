package cache

import (
	"fmt"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/holds"
)

// TestMain runs every test of the package with the cache's invariants
// (state.go) checked whenever Cache.mu is released.
func TestMain(m *testing.M) {
	invariantCheck = (*Cache).checkInvariantsLocked
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
	if ec == nil || ech == nil || !ech.Rec.Dirty {
		t.Fatal("the entries are not there, or the changed one is clean")
	}
	breakages := []struct {
		what          string
		break_, mend_ func()
	}{
		{"a charge not counted in used", func() { ec.Charged++ }, func() { ec.Charged-- }},
		{"an entry out of the LRU list", func() { c.lru.Remove(ec.Elem) }, func() { ec.Elem = c.lru.PushFront(ec) }},
		{"an indexed entry marked dropped", func() { ec.Dropped = true }, func() { ec.Dropped = false }},
		{"a dirty name out of the overlay", func() {
			c.overlay.Prune("changed", func(n string) bool { return n != "changed" })
		}, func() { c.markLocalLocked("changed") }},
		{"a writer without a handle", func() { ech.Writers++ }, func() { ech.Writers-- }},
		{"a hold nobody keeps", func() { c.holds.Add("clean") }, func() { c.holds.Release("clean") }},
		{"a clean entry with dirtySince", func() { ec.DirtySince = time.Now() }, func() { ec.DirtySince = time.Time{} }},
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

// checkInvariantsLocked reports the first invariant (above) that does not
// hold. c.mu is held.
func (c *Cache) checkInvariantsLocked() error {
	indexed := 0
	for el := c.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*entry)
		switch {
		case e.Elem != el || e.Dropped:
			return fmt.Errorf("%s: in the LRU list, dropped or elsewhere", e.Name)
		case c.entries[e.Name] == e:
			indexed++
		case e.Refs == 0:
			return fmt.Errorf("%s: in the LRU list, replaced in the index, held by nothing", e.Name)
		}
		c.inv.known[e] = struct{}{}
	}
	if indexed != len(c.entries) {
		return fmt.Errorf("%d entries indexed, %d of them in the LRU list", len(c.entries), indexed)
	}
	if err := c.overlay.Check(); err != nil {
		return err
	}
	for name, e := range c.entries {
		switch {
		case e.Name != name:
			return fmt.Errorf("entry %q indexed under %q", e.Name, name)
		case e.Dropped:
			return fmt.Errorf("%s: dropped entry indexed", name)
		case e.Elem == nil || e.Elem.Value != e:
			return fmt.Errorf("%s: indexed entry not in the LRU list", name)
		}
		c.inv.known[e] = struct{}{}
		if e.Rec.Dirty && !c.overlay.Has(name) && e.PersistMu.TryLock() {
			e.PersistMu.Unlock()
			return fmt.Errorf("%s: dirty, not in the local overlay's index, and no change of it is being recorded", name)
		}
		if !e.Rec.Dirty && !e.DirtySince.IsZero() {
			return fmt.Errorf("%s: clean with a dirtySince", name)
		}
	}
	var used int64
	heldBy := map[string]int{}
	for e := range c.inv.known {
		if err := c.checkEntryLocked(e); err != nil {
			return fmt.Errorf("%s: %w", e.Name, err)
		}
		used += e.Charged
		if e.Holding != "" {
			heldBy[e.Holding]++
		}
		if e.DlHold != "" {
			heldBy[e.DlHold]++
		}
		if e.Dropped && e.Refs == 0 && e.Charged == 0 && e.Holding == "" && e.DlHold == "" {
			delete(c.inv.known, e) // gone for good
		}
	}
	if u := c.budget.Used(); used != u {
		return fmt.Errorf("used is %d, the entries' charges add up to %d", u, used)
	}
	if !maps.Equal(heldBy, c.holds.Map()) {
		return fmt.Errorf("holds are %v, the entries hold %v", c.holds.Map(), heldBy)
	}
	for _, s := range []*holds.Prefixes{&c.quiet, &c.frozen} {
		for p, n := range s.All() {
			if n <= 0 {
				return fmt.Errorf("prefix %q counted %d times", p, n)
			}
		}
	}
	if c.waiters < 0 {
		return fmt.Errorf("%d waiters", c.waiters)
	}
	for h := range c.writeHandles {
		if _, ok := h.e.handles[h]; !h.orphan && !ok {
			return fmt.Errorf("%s: a write handle not orphaned is not among its entry's", h.e.Name)
		}
	}
	return nil
}

// checkEntryLocked checks the invariants of one entry, indexed or
// dropped.
func (c *Cache) checkEntryLocked(e *entry) error {
	if e.Charged < 0 {
		return fmt.Errorf("charged %d", e.Charged)
	}
	if e.Dropped && e.Refs == 0 && e.Rec.Dirty {
		return fmt.Errorf("dropped, held by nothing, and dirty")
	}
	if e.Writers != len(e.handles) || e.Refs < e.Writers {
		return fmt.Errorf("%d writers, %d handles, %d refs", e.Writers, len(e.handles), e.Refs)
	}
	busy := 0
	for h := range e.handles {
		if _, ok := c.writeHandles[h]; h.e != e || h.orphan || !ok {
			return fmt.Errorf("a write handle among its handles is another's, orphaned or closed")
		}
		busy += h.busy
	}
	if e.Inflight < busy {
		return fmt.Errorf("%d changes in flight, %d through its handles", e.Inflight, busy)
	}
	return nil
}
