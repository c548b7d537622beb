package cache

// Eviction: choosing the least recently used idle copies to make room,
// taking entries out of the index, and removing their records and files.

import (
	"errors"
	"os"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
)

// makeRoomLocked picks least recently used idle entries to evict until
// need more bytes fit under the cap and leave the disk's free-space floor
// free, and takes them out of the index. It reports false (and evicts
// nothing) if they cannot fit. need 0 (nothing is added) always fits:
// what can be evicted is.
func (c *Cache) makeRoomLocked(need int64) ([]*entry, bool) {
	if need > c.budget.Max() {
		return nil, false
	}
	over := c.budget.TryReserve(need) // until the next statfs says better
	if over <= 0 {
		return nil, true
	}
	pick, left := c.pickVictimsLocked(over)
	if left > 0 && need > 0 {
		return nil, false
	}
	victims := c.evictLocked(pick)
	c.budget.Reserve(need)
	return victims, true
}

// pickVictimsLocked picks idle entries, least recently used first, until
// their charges add up to over bytes; it returns them and what is left
// of over (> 0: not enough could be picked).
func (c *Cache) pickVictimsLocked(over int64) ([]*entry, int64) {
	var pick []*entry
	for el := c.lru.Back(); el != nil && over > 0; el = el.Prev() {
		e := el.Value.(*entry)
		if c.unevictableLocked(e) != "" || e.Charged <= 0 {
			continue // nothing to gain from a copy that counts nothing
		}
		pick = append(pick, e)
		over -= e.Charged
	}
	return pick, over
}

// evictLocked takes picked entries out of the index and the budget and
// returns those to remove (removeAll).
func (c *Cache) evictLocked(pick []*entry) []*entry {
	var victims []*entry
	for _, e := range pick {
		victims = append(victims, c.dropLocked(e)...)
		c.budget.Evicted(e.Charged)
		// Out of the budget now, not when removeAll gets to the file: the
		// room is handed to the caller under this lock, and counting both
		// until then showed the cache over its cap.
		c.chargeLocked(e, 0)
		c.stats.Evictions++
	}
	return victims
}

// dropLocked takes e out of the index. If no handle holds it, it is
// returned for removal; otherwise the last release removes it. A version
// this cache uploaded is remembered a short while when it leaves, as a
// rename's base (ownGone, madecopies.go).
func (c *Cache) dropLocked(e *entry) []*entry {
	if e.Dropped {
		return nil
	}
	e.Dropped = true
	c.notePrefetchWasteLocked(e)
	if c.entries[e.Name] == e {
		delete(c.entries, e.Name)
		if e.UploadedHere && !e.Rec.Dirty && !e.Rec.Deleted && e.Rec.Generation > 0 {
			c.ownGone.Remember(e.Name, e.Rec.Generation, time.Now())
		}
	}
	if e.Elem != nil {
		c.lru.Remove(e.Elem)
		e.Elem = nil
	}
	if e.Refs > 0 {
		return nil
	}
	return []*entry{e}
}

// removeAll deletes the records and files of dropped entries, stopping
// their downloads first, and returns their bytes to the budget.
func (c *Cache) removeAll(victims []*entry) {
	if len(victims) == 0 {
		return
	}
	kept := victims[:0]
	for _, e := range victims {
		if e.Rec.Dirty {
			// Never: a dirty entry is not evicted or replaced. If a bug
			// gets here, keep the file; the next start uploads it.
			c.log.Error("refusing to remove a cache file with changes not yet uploaded", "object", e.Name, "id", e.Rec.ID)
			continue
		}
		kept = append(kept, e)
	}
	victims = kept
	for _, e := range victims {
		c.mu.Lock()
		dl, f := e.Fill.Take()
		c.releaseDownloadHoldLocked(e)
		c.mu.Unlock()
		if dl != nil {
			dl.Stop()
			f.Close()
		}
	}
	var ops []durable.Op
	for _, e := range victims {
		if e.Rec.ID != 0 {
			ops = append(ops, durable.RemoveOp(e.Name, e.Rec.ID))
		}
	}
	var err error
	if len(ops) > 0 {
		err = c.j.Append(ops...)
	}
	if err != nil {
		// The files go below anyway (none holds changes): the next start
		// drops records whose file is missing.
		c.log.Warn("removing cache records failed; the next start drops them", "err", err)
	}
	for _, e := range victims {
		c.mu.Lock()
		spare := e.Spare
		e.Spare = nil
		c.mu.Unlock()
		if spare != nil {
			spare.Close()
		}
		if e.Rec.ID != 0 {
			if err := os.Remove(c.dataPath(e.Rec.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
				c.log.Warn("removing cache file failed", "object", e.Name, "err", err)
			}
		}
	}
	c.mu.Lock()
	for _, e := range victims {
		c.chargeLocked(e, 0)
		c.releaseHoldLocked(e)
	}
	c.budget.Wake() // the files are gone from the disk
	c.mu.Unlock()
}
