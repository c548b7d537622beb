package cache

// The state Cache.mu guards, grouped by subsystem, and the invariants
// that tie it together (checked in tests: checkInvariantsLocked,
// invariants_test.go).

import (
	"container/list"
	"sync"

	"github.com/bucketfs/bucketfs/cache/internal/holds"
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
	writeHandles map[*writeLedger]struct{}                               // every WriteHandle not yet closed
	madeCopies   holds.MadeCopies                                        // copies dropped once made, for a short while (madecopies.go)
	ownGone      holds.MadeCopies                                        // versions uploaded here whose copies left the index, for a short while: a rename's base only (madecopies.go)
}

// cacheRenames is what directory renames hold (rename.go, folder.go).
type cacheRenames struct {
	holds  holds.Counts   // name -> pending copies of its bucket version
	quiet  holds.Prefixes // prefixes whose transfers wait for a directory rename
	frozen holds.Prefixes // prefixes the bucket is renaming; their names wait (folder.go)
}

// cacheMu is Cache.mu. In tests (invariantCheck), every Unlock first
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

// invariantCheck, set by the package's tests (invariants_test.go, where
// the check is: checkInvariantsLocked), makes every Cache that Open
// returns check its invariants whenever Cache.mu is released. It is nil
// in a mount: the check walks every entry.
var invariantCheck func(c *Cache) error

// invariantState is what checkInvariantsLocked keeps between checks:
// the entries it has seen indexed and that are not yet gone for good
// (dropped, with no handle, no charge and no hold), since dropped
// entries are nowhere else.
type invariantState struct {
	known map[*entry]struct{}
}

// The invariants of the state Cache.mu guards, true whenever it is
// released (checkInvariantsLocked, invariants_test.go, checks them in
// tests):
//
// Index:
//   - every entry in c.entries is under its own name, not dropped, and
//     in c.lru (e.Elem holds e). c.lru holds no dropped entry; one that
//     a new entry replaced in c.entries (Exchange, between its journal
//     entry and dropping it; a rename's target set aside until the
//     journal has the rename, setAsideLocked) is held (refs > 0), so
//     never evicted.
//   - a dropped entry nothing holds (refs == 0) has no changes to send
//     (removeAll refuses to remove a dirty copy).
//
// Space:
//   - the budget's Used is the sum of e.Charged over the entries indexed
//     and the dropped ones not yet removed; no charge is negative. (The
//     budget's own lock is taken under Cache.mu: every Charge is made
//     under Cache.mu, so the sum holds whenever Cache.mu is released.)
//
// Write-back:
//   - e.Writers == len(e.handles); every handle in e.handles points back
//     at e, is not orphaned, and is among c.writeHandles; a handle not
//     orphaned is in its entry's handles; e.Refs >= e.Writers.
//   - e.Inflight >= 0, and counts at least its handles' changes.
//   - every indexed dirty entry's name is in c.overlay (sorted, no
//     name twice, its directories counted right: pending.Names.Check):
//     the local overlay never misses a change; but while
//     the change that made it dirty is being journaled (SetMeta, with
//     e.PersistMu held: the check tries it, never waits for it).
//   - a clean indexed entry has no DirtySince. (A dirty one may have no
//     dirtying channel: one loaded at start.)
//
// Renames:
//   - c.holds[n] counts the entries (indexed or dropped, not removed)
//     whose pending copy (holding) or download (DlHold) reads n; no
//     count is 0 or less. So do c.quiet and c.frozen count prefixes.
//   - c.waiters >= 0.
