package cache

// The state Cache.mu guards, grouped by subsystem, and the invariants
// that tie it together (checkInvariantsLocked).

import (
	"container/list"
	"fmt"
	"maps"
	"sync"

	"github.com/bucketfs/bucketfs/cache/internal/pending"
	"github.com/bucketfs/bucketfs/cache/internal/report"
	"github.com/bucketfs/bucketfs/transfer"
)

// cacheIndex is the index in memory: the cached version of each name and
// the space they use.
type cacheIndex struct {
	entries map[string]*entry // the cached version of each name
	lru     *list.List        // *entry, front = most recently used
	closed  bool
}

// cacheStatus is what Stats and Status report (status.go): the counters,
// and the ring of recent errors (report.RecentErrors), guarded here like
// a map: a failure is noted in the critical section that moves its
// counter, if it has one.
type cacheStatus struct {
	stats      Stats
	recentErrs report.RecentErrors // see Status
}

// cacheWriteBack is the write-back state: the uploader's queue
// (uploader.go), the local overlay (overlay.go), the open write handles
// (writehandle.go) and the waiting for a change of them (wait.go).
type cacheWriteBack struct {
	queue        pending.Queue                                           // dirty names, when each upload is due, transfers running (uploader.go)
	overlay      pending.Names                                           // sorted names that may be dirty, their directories (overlay.go)
	changed      chan struct{}                                           // closed and replaced when write-back state changes
	waiters      int                                                     // calls waiting in waitLocked
	waited       chan struct{}                                           // closed and replaced when a call starts waiting there (a test watches it)
	confirmedFn  func(name string, a transfer.ObjectAttrs, deleted bool) // see OnConfirmed
	conflictFn   ConflictFunc                                            // see OnConflict (conflictnote.go)
	writeHandles map[*WriteHandle]struct{}                               // every WriteHandle not yet closed
	madeCopies   map[string]madeCopy                                     // copies dropped once made, for a short while (madecopies.go)
}

// cacheRenames is what directory renames hold (rename.go, folder.go).
type cacheRenames struct {
	holds  map[string]int // name -> pending copies of its bucket version
	quiet  prefixSet      // prefixes whose transfers wait for a directory rename
	frozen prefixSet      // prefixes the bucket is renaming; their names wait (folder.go)
}

// cacheMu is Cache.mu. In tests (checkInvariants), every Unlock first
// checks the invariants below: each holder of the lock leaves them true.
type cacheMu struct {
	sync.Mutex
	check func() error // nil but in tests
}

// Unlock checks the invariants, if asked, and releases the lock; then it
// panics if one is broken (the lock released, so that deferred cleanups
// do not hang the test).
func (m *cacheMu) Unlock() {
	var err error
	if m.check != nil {
		err = m.check()
	}
	m.Mutex.Unlock()
	if err != nil {
		panic("cache invariant broken: " + err.Error())
	}
}

// checkInvariants, set by the package's tests, makes every Cache that
// Open returns check its invariants whenever Cache.mu is released.
var checkInvariants bool

// invariantState is what checkInvariantsLocked keeps between checks:
// the entries it has seen indexed and that are not yet gone for good
// (dropped, with no handle, no charge and no hold), since dropped
// entries are nowhere else.
type invariantState struct {
	known map[*entry]struct{}
}

// The invariants of the state Cache.mu guards, true whenever it is
// released (checkInvariantsLocked checks them, in tests):
//
// Index:
//   - every entry in c.entries is under its own name, not dropped, and
//     in c.lru (e.elem holds e). c.lru holds no dropped entry; one that
//     a new entry replaced in c.entries (Exchange, between its journal
//     entry and dropping it) is held (refs > 0), so never evicted.
//   - a dropped entry nothing holds (refs == 0) has no changes to send
//     (removeAll refuses to remove a dirty copy).
//
// Space:
//   - the budget's Used is the sum of e.charged over the entries indexed
//     and the dropped ones not yet removed; no charge is negative. (The
//     budget's own lock is taken under Cache.mu: every Charge is made
//     under Cache.mu, so the sum holds whenever Cache.mu is released.)
//
// Write-back:
//   - e.writers == len(e.handles); every handle in e.handles points back
//     at e, is not orphaned, and is among c.writeHandles; a handle not
//     orphaned is in its entry's handles; e.refs >= e.writers.
//   - e.inflight >= 0, and counts at least its handles' changes.
//   - every indexed dirty entry's name is in c.overlay (sorted, no
//     name twice, its directories counted right: pending.Names.Check):
//     the local overlay never misses a change; but while
//     the change that made it dirty is being journaled (SetMeta, with
//     e.persistMu held: the check tries it, never waits for it).
//   - a clean indexed entry has no dirtySince. (A dirty one may have no
//     dirtying channel: one loaded at start.)
//
// Renames:
//   - c.holds[n] counts the entries (indexed or dropped, not removed)
//     whose pending copy (holding) or download (dlHold) reads n; no
//     count is 0 or less. So do c.quiet and c.frozen count prefixes.
//   - c.waiters >= 0.

// checkInvariantsLocked reports the first invariant (above) that does not
// hold. c.mu is held.
func (c *Cache) checkInvariantsLocked() error {
	indexed := 0
	for el := c.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*entry)
		switch {
		case e.elem != el || e.dropped:
			return fmt.Errorf("%s: in the LRU list, dropped or elsewhere", e.name)
		case c.entries[e.name] == e:
			indexed++
		case e.refs == 0:
			return fmt.Errorf("%s: in the LRU list, replaced in the index, held by nothing", e.name)
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
		case e.name != name:
			return fmt.Errorf("entry %q indexed under %q", e.name, name)
		case e.dropped:
			return fmt.Errorf("%s: dropped entry indexed", name)
		case e.elem == nil || e.elem.Value != e:
			return fmt.Errorf("%s: indexed entry not in the LRU list", name)
		}
		c.inv.known[e] = struct{}{}
		if e.rec.Dirty && !c.overlay.Has(name) && e.persistMu.TryLock() {
			e.persistMu.Unlock()
			return fmt.Errorf("%s: dirty, not in the local overlay's index, and no change of it is being recorded", name)
		}
		if !e.rec.Dirty && !e.dirtySince.IsZero() {
			return fmt.Errorf("%s: clean with a dirtySince", name)
		}
	}
	var used int64
	holds := map[string]int{}
	for e := range c.inv.known {
		if err := c.checkEntryLocked(e); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
		used += e.charged
		if e.holding != "" {
			holds[e.holding]++
		}
		if e.dlHold != "" {
			holds[e.dlHold]++
		}
		if e.dropped && e.refs == 0 && e.charged == 0 && e.holding == "" && e.dlHold == "" {
			delete(c.inv.known, e) // gone for good
		}
	}
	if u := c.budget.Used(); used != u {
		return fmt.Errorf("used is %d, the entries' charges add up to %d", u, used)
	}
	if !maps.Equal(holds, c.holds) {
		return fmt.Errorf("holds are %v, the entries hold %v", c.holds, holds)
	}
	for _, s := range []prefixSet{c.quiet, c.frozen} {
		for p, n := range s {
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
			return fmt.Errorf("%s: a write handle not orphaned is not among its entry's", h.e.name)
		}
	}
	return nil
}

// checkEntryLocked checks the invariants of one entry, indexed or
// dropped.
func (c *Cache) checkEntryLocked(e *entry) error {
	if e.charged < 0 {
		return fmt.Errorf("charged %d", e.charged)
	}
	if e.dropped && e.refs == 0 && e.rec.Dirty {
		return fmt.Errorf("dropped, held by nothing, and dirty")
	}
	if e.writers != len(e.handles) || e.refs < e.writers {
		return fmt.Errorf("%d writers, %d handles, %d refs", e.writers, len(e.handles), e.refs)
	}
	busy := 0
	for h := range e.handles {
		if _, ok := c.writeHandles[h]; h.e != e || h.orphan || !ok {
			return fmt.Errorf("a write handle among its handles is another's, orphaned or closed")
		}
		busy += h.busy
	}
	if e.inflight < busy {
		return fmt.Errorf("%d changes in flight, %d through its handles", e.inflight, busy)
	}
	return nil
}
