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
// Space freed on the disk by other programs is seen only by measuring:
// a writer held by the free-space floor measures again every
// space.FreeTTL while it waits. A woken writer measures the disk and
// re-checks at once (makeRoomLocked), and waits again if the room is
// still short.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/space"
)

// roomHolders is how many of the files holding the room a full cache's
// error names.
const roomHolders = 3

// makeRoomToGrow makes the budget hold h's file growing to size and
// reserves it (see the top of space.go): it evicts clean copies, and if
// changed files fill the cache (or the disk is under its floor), it sends
// them now and waits for room, up to Options.FullWait; then, after a
// last try, it fails with ErrNoSpace, saying why. The room is reserved on
// the entry the handle has when it is found: a rename or an exchange
// while the write waits moves the handle, and a deletion orphans it (an
// orphan's bytes count nothing).
func (c *Cache) makeRoomToGrow(w *writeLedger, size int64) error {
	var deadline <-chan time.Time
	expired := false
	maxAge := space.FreeTTL // after the first try, the disk is measured at every one
	for {
		c.budget.Measure(maxAge)
		c.mu.Lock()
		e := w.e
		grow := size - max(e.rec.Size, e.charged)
		if w.orphan || grow <= 0 || e.dropped {
			c.mu.Unlock()
			return nil
		}
		victims, ok := c.makeRoomLocked(grow)
		if ok {
			c.chargeLocked(e, size) // reserved before a byte is written
			c.pressureLocked(time.Now())
			c.mu.Unlock()
			c.removeAll(victims)
			return nil
		}
		if expired {
			why := c.whyFullLocked(grow)
			c.mu.Unlock()
			return fmt.Errorf("%s: %w: %s", e.name, ErrNoSpace, why)
		}
		if short, _ := c.budget.DiskShort(grow); maxAge > 0 && short > 0 {
			// The last measure may be older than the room freed since:
			// measure before waiting.
			c.mu.Unlock()
			maxAge = 0
			continue
		}
		maxAge = 0
		c.sendNowLocked()
		wake, fits, diskShort := c.budget.Watch(grow)
		if fits {
			// A measure since makeRoomLocked found the room: take it.
			c.mu.Unlock()
			continue
		}
		var poll <-chan time.Time
		if diskShort {
			poll = time.After(space.FreeTTL) // room freed by other programs is seen only by measuring
		}
		if deadline == nil {
			t := time.NewTimer(c.opts.FullWait)
			defer t.Stop()
			deadline = t.C
			c.log.Warn("the cache is full of changes not yet uploaded (or its disk is under its free-space floor); writes wait for uploads",
				"object", e.name, "cache_max_size", c.opts.MaxSize, "min_free", c.budget.Floor())
		}
		c.mu.Unlock()
		select {
		case <-wake:
		case <-poll:
		case <-deadline:
			expired = true // one last try, then the error
		}
		c.budget.Unwatch()
	}
}

// whyFullLocked says why grow more bytes find no room: the cap, the
// disk's free-space floor, and the largest files holding the room that
// cannot be evicted.
func (c *Cache) whyFullLocked(grow int64) string {
	why := c.budget.WhyFull(grow)
	if len(why) == 0 {
		why = append(why, fmt.Sprintf("%s more found no room", space.SizeText(grow)))
	}
	var held []*entry
	for _, e := range c.entries {
		if e.charged > 0 && c.unevictableLocked(e) != "" {
			held = append(held, e)
		}
	}
	slices.SortFunc(held, func(a, b *entry) int { return cmp.Compare(b.charged, a.charged) })
	var names []string
	for _, e := range held[:min(len(held), roomHolders)] {
		names = append(names, fmt.Sprintf("%s %s (%s)", e.name, space.SizeText(e.charged), c.unevictableLocked(e)))
	}
	if len(names) > 0 {
		why = append(why, fmt.Sprintf("held by %d files that cannot be evicted, the largest: %s", len(held), strings.Join(names, ", ")))
	}
	return strings.Join(why, "; ")
}

// unevictableLocked says why e cannot be evicted now ("" if it can):
// the conditions makeRoomLocked skips it for.
func (c *Cache) unevictableLocked(e *entry) string {
	switch {
	case e.uploading:
		return "uploading"
	case e.rec.Dirty:
		return "changed, not uploaded yet"
	case e.refs > 0:
		return "open"
	case !isClosed(e.ready):
		return "being made"
	case e.rec.Pinned:
		return "pinned"
	}
	return ""
}
