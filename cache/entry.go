package cache

// The entry of one cached object version, how a new one enters the
// index, and how its record is written.

import (
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/entries"
)

// entry is one cached object version: its state (package entries), and
// the write handles open on it. Its fields are guarded by Cache.mu (but
// PersistMu and what it guards); the invariants that tie entries to the
// rest of the cache are in state.go.
type entry struct {
	entries.Entry
	handles map[*writeLedger]struct{} // the handles open for writing (Writers); a rename moves them, a deletion orphans them
	watch   *untouched                // a hidden open of the clean copy that has written nothing yet, as far as is known (untouched.go)
}

// publishLocked puts a new entry for name with record rec in the index,
// not ready: it is charged what rec costs (costOf) and holds its pending
// copy's source, if rec is one; a change (rec.Dirty) is in the local
// overlay, changed since since (zero: since before the start). Whoever
// made it closes ready once its record and file exist, or calls
// unpublishLocked.
func (c *Cache) publishLocked(name string, rec record, since time.Time) *entry {
	e := &entry{Entry: entries.New(name, rec)}
	if rec.Dirty {
		e.Dirtying = make(chan struct{})
		close(e.Dirtying)
		e.DirtySince = since
		c.markLocalLocked(name)
	}
	e.Elem = c.lru.PushFront(e)
	c.entries[name] = e
	c.chargeLocked(e, costOf(rec))
	c.holdLocked(e)
	return e
}

// unpublishLocked takes e, published for a change the journal refused
// (err), out of the index: whoever waits for it gets err, and its change
// is no change (its file may go). It returns what to remove (removeAll).
func (c *Cache) unpublishLocked(e *entry, err error) []*entry {
	e.Err = err
	close(e.Ready)
	e.Rec.Dirty = false
	c.releaseHoldLocked(e)
	return c.dropLocked(e)
}

// setAside is an entry a rename is about to give another file's name to,
// set aside until the journal has the rename (setAsideLocked). A nil
// *setAside stands for a name that had no entry: its methods do nothing.
type setAside struct {
	e    *entry
	gen  int64 // e's generation when it was set aside
	base int64 // the generation the rename's new record is based on
}

// setAsideLocked sets e aside for a rename that is to put another file at
// its name: the caller publishes the new entry there, and e waits out of
// the index, as it was (its handles, its change, its file), with a
// reference so that nothing evicts it, and no transfer of it records a
// try meanwhile (recordAttempt). If the journal refuses the rename,
// restoreLocked puts it back and nothing happened; once the journal has
// the rename, replaceLocked makes the new entry its successor. Either way
// the caller then releases the reference (releaseAside), which removes
// it once replaced. base is the generation the rename's new record is
// based on.
func (c *Cache) setAsideLocked(e *entry, base int64) *setAside {
	e.Refs++
	e.Aside = true
	return &setAside{e: e, gen: e.Rec.Generation, base: base}
}

// restoreLocked puts a set-aside entry back at its name: the rename that
// set it aside failed, and its new entry was unpublished. A try of its
// change stopped meanwhile goes again. No other entry can have taken the
// name meanwhile: a rename never sets aside an entry that is not ready
// (waitTargetLocked, and a directory's plan waits for those under its
// new prefix), so the new entry held the name until it was unpublished.
func (c *Cache) restoreLocked(a *setAside) {
	if a == nil {
		return
	}
	e := a.e
	e.Aside = false
	if e.Dropped {
		return // its change went as a conflict copy meanwhile (conflictDone)
	}
	if other := c.entries[e.Name]; other != nil {
		// Cannot happen (above). Keep both: the other stays at the name,
		// and e, changes and all, stays out of the index but is not
		// removed (release leaves a held entry's file alone until it is
		// dropped), so that the next start finds its record.
		c.log.Error("a rename that failed found its target's name taken by another entry; the target's record stays for the next start", "object", e.Name)
		return
	}
	c.entries[e.Name] = e
	if e.Rec.Dirty {
		c.scheduleLocked(e.Name, c.opts.WriteBackDelay)
	}
}

// replaceLocked ends a set-aside entry once the journal has the rename
// that gives its name to ne: handles still open on it keep their copy
// (orphaned), as on a local disk, and its change is no change (ne is the
// name's change now). If a transfer of it ended meanwhile and moved its
// generation (an upload, or a deletion: 0), ne is based on that now, as
// supersededLocked does for one that ends later.
func (c *Cache) replaceLocked(a *setAside, ne *entry) {
	if a == nil {
		return
	}
	e := a.e
	e.Aside = false
	if gen := e.Rec.Generation; gen != a.gen && ne.Rec.Generation == a.base {
		ne.Rec.Generation = gen
		if gen > 0 {
			ne.RebasedFrom, ne.RebasedTo = a.base, gen
		}
	}
	c.replacedLocked(e)
}

// releaseAside lets go of the reference setAsideLocked took, with no lock
// held: a target replaced goes once nothing else holds it.
func (c *Cache) releaseAside(a *setAside) {
	if a != nil {
		c.release(a.e)
	}
}

// replacedLocked takes e out of the index for a rename that puts another
// file at its name: handles open on it keep their copy (orphaned), as on
// a local disk, and its change is no change (the new file is the name's
// change now). It returns what to remove (removeAll).
func (c *Cache) replacedLocked(e *entry) []*entry {
	c.orphanLocked(e)
	e.Rec.Dirty = false
	return c.dropLocked(e)
}

// deletedLocked makes e, whose record is now a deletion that one
// journal entry has just written (counted in RecSeq), a change like any
// other: in the local overlay, changed since now (if it was not
// already), its dirty flag durable, holding no copy's source, and queued
// after the write-back delay.
func (c *Cache) deletedLocked(e *entry, now time.Time) {
	c.markLocalLocked(e.Name)
	e.Dirtied(now)
	e.Version++
	if e.Dirtying == nil {
		e.Dirtying = make(chan struct{})
		close(e.Dirtying)
	}
	e.RecSeq++
	c.releaseHoldLocked(e)
	c.scheduleLocked(e.Name, c.opts.WriteBackDelay)
}

// persistEntry writes snapshot rec (number seq) as e's record to the
// journal, unless a later one has been written (entries.Entry.Persist),
// and lets go of the copy source e held if rec is no copy.
func (c *Cache) persistEntry(e *entry, rec record, seq uint64) error {
	written, err := e.Persist(c.j, rec, seq)
	if written && rec.CopyFrom == "" {
		// The journal no longer says the content is a copy (a record
		// never becomes one again): the source version is not needed
		// by this entry any more.
		c.mu.Lock()
		c.releaseHoldLocked(e)
		c.mu.Unlock()
	}
	return err
}
