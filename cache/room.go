package cache

// Waiting for room: a write that finds the cache (or its disk) full
// waits in makeRoomToGrow until room is freed, up to Options.FullWait,
// and then fails saying why.
//
// What wakes the waiters: the budget's wake (space.Budget.Wake; Watch
// hands out the channel). It is called at the few places every event
// that frees room (or may) passes through, so that a new way of freeing
// room cannot forget to wake them:
//
//   - chargeLocked lowering a charge (space.Budget.Charge wakes): every
//     byte that leaves the budget (a file removed, truncated, evicted or
//     renamed over, a deletion recorded or settled, a reservation given
//     back) goes through it;
//   - removeAll, once the files of dropped entries are gone from the disk;
//   - notifyLocked, every change of write-back state (an upload or a
//     deletion settled, an upload failed or held): a copy made clean is
//     evictable, and a failure ends nothing a waiter could wait for;
//   - release of an entry's last handle: a closed copy is evictable;
//   - an unpinned copy (setPin): it is evictable;
//   - space.Budget.Measure finding more free space on the disk than it
//     last did (it wakes without Cache.mu: Watch returns the channel and
//     whether the room fits at one instant, so that wake is never lost).
//
// The waiting itself (the disk measured before each try, the deadline,
// the last try) is space.Budget.WaitForRoom's; each try is tryRoom.

import (
	"fmt"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/space"
)

// makeRoomToGrow makes the budget hold w's file growing to size and
// reserves it (see the top of space.go): it evicts clean copies, and if
// changed files fill the cache (or the disk is under its floor), it sends
// them now and waits for room, up to Options.FullWait; then, after a
// last try, it fails with ErrNoSpace, saying why.
func (c *Cache) makeRoomToGrow(w *writeLedger, size int64) error {
	return c.budget.WaitForRoom(c.opts.FullWait, c.log, func(t *space.Wait) (bool, error) { return w.tryRoom(size, t) })
}

// tryRoom is one try of w's file for the room of size bytes (space.Try).
// The room is reserved on the entry the handle has at this try: a rename
// or an exchange while the write waits moves the handle, and a deletion
// orphans it (an orphan's bytes count nothing).
func (w *writeLedger) tryRoom(size int64, t *space.Wait) (bool, error) {
	c := w.c
	c.mu.Lock()
	e := w.e
	grow := size - max(e.Rec.Size, e.Charged)
	if w.orphan || grow <= 0 || e.Dropped {
		c.mu.Unlock()
		return true, nil
	}
	victims, ok := c.makeRoomLocked(grow)
	if ok {
		c.chargeLocked(e, size) // reserved before a byte is written
		c.pressureLocked(time.Now())
		c.mu.Unlock()
		c.removeAll(victims)
		return true, nil
	}
	var err error
	switch {
	case t.Last():
		err = fmt.Errorf("%s: %w: %s", e.Name, ErrNoSpace, c.whyFullLocked(grow))
	case t.Waits(grow):
		c.sendNowLocked()
		t.Watch(grow, e.Name)
	}
	c.mu.Unlock()
	return false, err
}

// whyFullLocked says why grow more bytes find no room: the cap, the
// disk's free-space floor, and the largest files holding the room that
// cannot be evicted.
func (c *Cache) whyFullLocked(grow int64) string {
	var held []space.Holder
	for _, e := range c.entries {
		if why := c.unevictableLocked(e); e.Charged > 0 && why != "" {
			held = append(held, space.Holder{Name: e.Name, Bytes: e.Charged, Why: why})
		}
	}
	return c.budget.WhyFull(grow, held)
}

// unevictableLocked says why e cannot be evicted now ("" if it can):
// the conditions makeRoomLocked skips it for.
func (c *Cache) unevictableLocked(e *entry) string {
	switch {
	case e.Uploading:
		return "uploading"
	case e.Rec.Dirty:
		return "changed, not uploaded yet"
	case e.Refs > 0:
		return "open"
	case !isClosed(e.Ready):
		return "being made"
	case e.Rec.Pinned:
		return "pinned"
	}
	return ""
}
