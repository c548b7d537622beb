package cache

import (
	"os"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/space"
	"github.com/bucketfs/bucketfs/cache/internal/write"
)

// Space: the limits this file keeps, and how. The numbers (the cap and
// the charges against it, the disk's floor and free space, the writers'
// wake, the pressure) are a space.Budget (package internal/space); what
// is charged to which entry, and which entries go to make room, is
// decided here, in room.go and in evict.go.
//
//   - No file grows past MaxFileSize (Options.MaxSize, and never past the
//     5 TiB that GCS stores in one object): a write is cut short at the
//     limit, and one that starts at it, a truncation or an allocation
//     past it fail with ErrTooBig (EFBIG) before anything is written.
//   - The budget's Used (every cached version, changed ones included) stays
//     under Options.MaxSize for everything written through WriteHandle:
//     makeRoomToGrow charges a write's growth to its entry before the
//     bytes are written (a reservation, settled to the file's size when
//     the change ends), so concurrent writers cannot overshoot together.
//     A write that cannot get room evicts clean copies, then sends the
//     changed files now and waits for room, up to Options.FullWait, then
//     fails with ErrNoSpace, saying why (room.go). Changed bytes are part
//     of used, so they never pass the cap either; a deletion costs
//     nothing (costOf).
//   - When changed files fill space.PressureTenths of the cap, every one
//     not open for writing is sent at once, whatever the write-back delay.
//   - The cache's disk keeps Options.MinFree bytes free: below that,
//     clean copies no handle holds are evicted, as at the cap; a copy
//     that would take the disk under it is read uncached, and a write
//     that would waits for uploads (which make changed copies clean, so
//     evictable), then fails with ErrNoSpace.
//
// Writes the kernel makes itself (a WriteHandle opened hidden, for FUSE
// passthrough) never pass through here: nothing can hold them to these
// limits while the handle is open, as on a local disk: they end at the
// disk's own ENOSPC. So hidden writers open only while the disk has
// space.HiddenHeadroom free above its floor (RoomForHidden), and their
// size is counted every space.HiddenEvery (countHidden) and at Close,
// which keeps that headroom (evicts clean copies) and makes room for the
// cap (sends changed files early) as for any growth. So a file written that
// way may pass the cap, and take the disk under its floor, while it is
// open; what the disk holds is its limit. Past MaxObjectSize it is
// refused at fsync and close (WriteHandle.CheckSize: EFBIG), and never
// sent (internal/upload: held as a refusal a person fixes). The fs
// package opens hidden writers for new files and copies held whole when
// passthrough writes are on (the default where passthrough works), and
// whenever the kernel leaves no choice (see fs/file.go writeModeLocked).

// ErrTooBig means a write, truncation or allocation would make a file
// larger than the largest file the cache holds (MaxFileSize).
var ErrTooBig = write.ErrTooBig

// MaxObjectSize is the largest object GCS stores.
const MaxObjectSize = space.MaxObjectSize

// MinFree is the free space kept on the cache's disk (0: none).
func (c *Cache) MinFree() int64 { return c.budget.Floor() }

// MaxFileSize is the largest file the cache holds: Options.MaxSize, at
// most MaxObjectSize, and with a free-space floor, at most what the
// cache's disk holds above it. A file past that could never get its room:
// it is refused at once (EFBIG), not after Options.FullWait (ENOSPC).
func (c *Cache) MaxFileSize() int64 { return c.budget.MaxFileSize() }

// sendNowLocked queues every changed file not open for writing for
// upload now, whatever its write-back delay: its copy becomes clean, so
// evictable.
func (c *Cache) sendNowLocked() {
	for name, o := range c.entries {
		if o.Rec.Dirty && o.Writers == 0 {
			c.queue.SendNow(name)
		}
	}
	c.notifyLocked()
}

// pressureLocked sends the changed files now when they fill
// space.PressureTenths of the cap, and returns whether they do (a file
// closed meanwhile is then sent at once too). Counting walks every entry:
// the budget asks for it only when the cache is that full, at most every
// 100 ms.
func (c *Cache) pressureLocked(now time.Time) bool {
	on, counted := c.budget.Pressure(now, func() int64 {
		var dirty int64
		for _, e := range c.entries {
			if e.Rec.Dirty {
				dirty += e.Charged
			}
		}
		return dirty
	})
	if on && counted {
		c.sendNowLocked()
	}
	return on
}

// writeBackDelayLocked is how long a file closed now waits before its
// upload: Options.WriteBackDelay, or nothing when changed files are near
// the cap.
func (c *Cache) writeBackDelayLocked() time.Duration {
	if c.pressureLocked(time.Now()) {
		return 0
	}
	return c.opts.WriteBackDelay
}

// moveChargeLocked moves what e counts to ne, the new name's entry of
// e's file (a rename: ne's file is a hard link to e's, which e then lets
// go of, detachData): ne counts the bytes once, with the room a write
// reserved on e before the rename moved its handle to ne, which the
// write's end settles there (settleChargeLocked); e, a deletion now,
// counts nothing.
func (c *Cache) moveChargeLocked(e, ne *entry) {
	if e.Charged > ne.Charged {
		c.chargeLocked(ne, e.Charged)
	}
	c.chargeLocked(e, 0)
}

// chargeSizeLocked charges e its size, but keeps what changes still in
// flight reserved beyond it (settleChargeLocked gives that back when they
// end): a shrinking truncation or an upload ending must not hand a
// writer's reservation to another.
func (c *Cache) chargeSizeLocked(e *entry) {
	n := e.Rec.Size
	if e.Inflight > 0 || e.Writers > 0 {
		// A writer may be between makeRoomToGrow's reservation and its
		// begin (not yet in flight): an upload ending then must not take
		// its room away (end or settleCharge gives it back).
		n = max(n, e.Charged)
	}
	c.chargeLocked(e, n)
}

// settleChargeLocked gives back what e reserved beyond its size once no
// change of it is in flight.
func (c *Cache) settleChargeLocked(e *entry) {
	if e.Inflight == 0 && !e.Dropped && e.Charged > costOf(e.Rec) {
		c.chargeLocked(e, costOf(e.Rec))
	}
}

// Unreserve gives back what w's entry reserved for a change that did
// not begin (write.Cache).
func (w *writeLedger) Unreserve() {
	w.c.mu.Lock()
	if !w.orphan {
		w.c.settleChargeLocked(w.e)
	}
	w.c.mu.Unlock()
}

// Name is the name of w's file now (write.Cache).
func (w *writeLedger) Name() string {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.e.Name
}

// RoomForHidden reports whether a writer the kernel serves itself
// (passthrough) may open now: the disk has space.HiddenHeadroom free above its
// floor, after evicting clean copies for it if need be. It does I/O
// (statfs, removals): call it with no lock held.
func (c *Cache) RoomForHidden() bool {
	c.budget.Refresh()
	c.mu.Lock()
	victims, ok := c.diskRoomLocked(space.HiddenHeadroom, false)
	c.mu.Unlock()
	c.removeAll(victims)
	return ok
}

// diskRoomLocked evicts clean copies, least recently used first, until
// the disk has need bytes free above its floor (as last measured), and
// reports whether it has. If it cannot have them, it evicts nothing,
// unless partial asks for what can be had.
func (c *Cache) diskRoomLocked(need int64, partial bool) ([]*entry, bool) {
	short, measured := c.budget.DiskShort(need)
	if !measured {
		return nil, false
	}
	if short <= 0 {
		return nil, true
	}
	pick, left := c.pickVictimsLocked(short)
	if left > 0 && !partial {
		return nil, false
	}
	return c.evictLocked(pick), left <= 0
}

// countHidden charges the files open for writing through passthrough
// (hidden handles) their size now, so that the budget, the eviction of
// clean copies and the early uploads follow them at least every
// space.HiddenEvery instead of only at their Close. It stats files: call
// it with no lock held.
func (c *Cache) countHidden() {
	type open struct {
		e *entry
		f *os.File
	}
	var hs []open
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return // Close records what is cached; nothing is evicted under it
	}
	for w := range c.writeHandles {
		if w.h.Hidden() && !w.orphan {
			hs = append(hs, open{w.e, w.h.File()})
		}
	}
	c.mu.Unlock()
	if len(hs) == 0 {
		return
	}
	sizes := make([]int64, len(hs))
	for i, h := range hs {
		sizes[i] = -1
		if st, err := h.f.Stat(); err == nil {
			sizes[i] = st.Size()
		}
	}
	c.budget.Refresh()
	c.mu.Lock()
	for i, h := range hs {
		if sizes[i] > h.e.Rec.Size && !h.e.Dropped {
			c.resizeLocked(h.e, sizes[i])
		}
	}
	victims, _ := c.makeRoomLocked(0)
	more, _ := c.diskRoomLocked(space.HiddenHeadroom, true)
	c.pressureLocked(time.Now())
	c.mu.Unlock()
	c.removeAll(append(victims, more...))
}

// costOf is what a record counts against the cache's size: its size, but
// nothing for a pending copy not cached (renaming a directory bigger than
// the cache must not evict everything else), nor for a deletion (its
// cache file is empty). Bytes read into such a copy before it is made
// are not counted until it is made or written.
func costOf(r record) int64 {
	if r.PendingCopy() && !r.Complete || r.Deleted {
		return 0
	}
	return r.Size
}

// chargeLocked sets what e counts in the budget to n bytes. Every byte
// that leaves the budget's Used goes through here (the budget wakes the
// writers waiting for room when a charge is lowered).
func (c *Cache) chargeLocked(e *entry, n int64) {
	c.budget.Charge(e.Charged, n)
	e.Charged = n
}
