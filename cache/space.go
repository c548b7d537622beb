package cache

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Space: the limits this file keeps, and how.
//
//   - No file grows past MaxFileSize (Options.MaxSize, and never past the
//     5 TiB that GCS stores in one object): a write is cut short at the
//     limit, and one that starts at it, a truncation or an allocation
//     past it fail with ErrTooBig (EFBIG) before anything is written.
//   - Cache.used (every cached version, changed ones included) stays
//     under Options.MaxSize for everything written through WriteHandle:
//     makeRoomToGrow charges a write's growth to its entry before the
//     bytes are written (a reservation, settled to the file's size when
//     the change ends), so concurrent writers cannot overshoot together.
//     A write that cannot get room evicts clean copies, then sends the
//     changed files now and waits for room, up to Options.FullWait, then
//     fails with ErrNoSpace, saying why (room.go). Changed bytes are part
//     of used, so they never pass the cap either; a deletion costs
//     nothing (costOf).
//   - When changed files fill pressureTenths of the cap, every one not
//     open for writing is sent at once, whatever the write-back delay.
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
// hiddenHeadroom free above its floor (RoomForHidden), and their size
// is counted every hiddenEvery (countHidden) and at Close, which keeps
// that headroom (evicts clean copies) and makes room for the cap (sends
// changed files early) as for any growth. So a file written that
// way may pass the cap, and take the disk under its floor, while it is
// open; what the disk holds is its limit. Past MaxObjectSize it is
// refused at fsync and close (WriteHandle.CheckSize: EFBIG), and never
// sent (uploadContent: held as a refusal a person fixes). The fs
// package opens hidden writers for new files and copies held whole when
// passthrough writes are on (the default where passthrough works), and
// whenever the kernel leaves no choice (see fs/file.go writeModeLocked).

// ErrTooBig means a write, truncation or allocation would make a file
// larger than the largest file the cache holds (MaxFileSize).
var ErrTooBig = errors.New("the file would pass the largest size the cache holds")

// MaxObjectSize is the largest object GCS stores.
const MaxObjectSize = 5 << 40

const (
	// pressureTenths of the cap: changed files at or above it are sent
	// at once.
	pressureTenths = 9
	// pressureEvery bounds how often a growing write walks the entries
	// to count changed bytes.
	pressureEvery = 100 * time.Millisecond
	// freeTTL is how long a statfs of the cache disk is trusted. Between
	// two, the growth made here is subtracted from it.
	freeTTL = 250 * time.Millisecond
	// autoMinFree is the floor asked by a negative Options.MinFree: 5% of
	// the disk, at most this.
	autoMinFree = 1 << 30
)

// MinFree is the free space kept on the cache's disk (0: none).
func (c *Cache) MinFree() int64 { return c.floor }

// MaxFileSize is the largest file the cache holds: Options.MaxSize, at
// most MaxObjectSize, and with a free-space floor, at most what the
// cache's disk holds above it. A file past that could never get its room:
// it is refused at once (EFBIG), not after Options.FullWait (ENOSPC).
func (c *Cache) MaxFileSize() int64 {
	n := min(c.opts.MaxSize, MaxObjectSize)
	if c.diskCap > 0 {
		n = min(n, c.diskCap)
	}
	return n
}

// diskCapFor is the most the disk of dir can ever hold above floor (the
// whole disk, as if nothing else were on it): 0, no bound, without a
// floor (the disk's own ENOSPC is then the limit) or if it cannot be
// measured.
func diskCapFor(dir string, floor int64) int64 {
	if floor <= 0 {
		return 0
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return max(int64(st.Blocks)*st.Bsize-floor, 1)
}

// objectTooBig is the error for a file of size bytes, past the largest
// object the bucket stores: written by the kernel (passthrough), which
// no limit of the cache holds back.
func objectTooBig(name string, size int64) error {
	return fmt.Errorf("%s: %w (%d bytes; a GCS object holds at most 5 TiB): truncate or delete it", name, ErrTooBig, size)
}

// tooBig is the error for a file that would reach end bytes.
func (c *Cache) tooBig(name string, end int64) error {
	return fmt.Errorf("%s: %w (%d bytes asked, at most %d)", name, ErrTooBig, end, c.MaxFileSize())
}

// floorFor turns Options.MinFree into the floor for the disk of dir: a
// negative value asks for 5% of the disk, at most autoMinFree.
func floorFor(dir string, minFree int64) (int64, error) {
	if minFree >= 0 {
		return minFree, nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("cache dir %s: %w", dir, err)
	}
	return min(int64(st.Blocks)*st.Bsize/20, autoMinFree), nil
}

// refreshFree measures the free space of the cache disk if the last
// measure is older than freeTTL. It does I/O (statfs): never call it with
// Cache.mu held.
func (c *Cache) refreshFree() { c.measureFree(freeTTL) }

// measureFree measures the free space of the cache disk if the last
// measure is older than maxAge (0: always). More free space than the
// last measure said wakes the writers waiting for room (room.go). It
// does I/O (statfs): never call it with Cache.mu held.
func (c *Cache) measureFree(maxAge time.Duration) {
	if c.floor <= 0 {
		return
	}
	c.mu.Lock()
	fresh := maxAge > 0 && time.Since(c.freeAt) < maxAge
	c.mu.Unlock()
	if fresh {
		return
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(c.dataDir, &st); err != nil {
		return // keep the last measure; the disk's own ENOSPC still holds
	}
	c.mu.Lock()
	free := int64(st.Bavail) * st.Bsize
	if free > c.free+c.freeing {
		c.roomLocked()
	}
	c.free, c.freeAt, c.freeing = free, time.Now(), 0
	c.mu.Unlock()
}

// diskShortLocked is how many bytes must be freed on the cache disk so
// that need more bytes leave the floor free (<= 0: none).
func (c *Cache) diskShortLocked(need int64) int64 {
	if c.floor <= 0 || c.freeAt.IsZero() {
		return 0
	}
	return c.floor + need - (c.free + c.freeing)
}

// sendNowLocked queues every changed file not open for writing for
// upload now, whatever its write-back delay: its copy becomes clean, so
// evictable.
func (c *Cache) sendNowLocked() {
	for name, o := range c.entries {
		if o.rec.Dirty && o.writers == 0 {
			if at, ok := c.queue[name]; !ok || !at.IsZero() {
				c.queue[name] = time.Time{}
			}
		}
	}
	c.notifyLocked()
}

// pressureLocked sends the changed files now when they fill
// pressureTenths of the cap, and notes it in c.pressure (a file closed
// meanwhile is then sent at once too). Counting walks every entry: it
// runs only when the cache is that full, at most every pressureEvery.
func (c *Cache) pressureLocked(now time.Time) {
	limit := c.opts.MaxSize / 10 * pressureTenths
	if c.used < limit {
		c.pressure = false
		return
	}
	if now.Sub(c.pressureAt) < pressureEvery {
		return
	}
	c.pressureAt = now
	var dirty int64
	for _, e := range c.entries {
		if e.rec.Dirty {
			dirty += e.charged
		}
	}
	c.pressure = dirty >= limit
	if c.pressure {
		c.sendNowLocked()
	}
}

// writeBackDelayLocked is how long a file closed now waits before its
// upload: Options.WriteBackDelay, or nothing when changed files are near
// the cap.
func (c *Cache) writeBackDelayLocked() time.Duration {
	c.pressureLocked(time.Now())
	if c.pressure {
		return 0
	}
	return c.opts.WriteBackDelay
}

// chargeSizeLocked charges e its size, but keeps what changes still in
// flight reserved beyond it (settleChargeLocked gives that back when they
// end): a shrinking truncation or an upload ending must not hand a
// writer's reservation to another.
func (c *Cache) chargeSizeLocked(e *entry) {
	n := e.rec.Size
	if e.inflight > 0 || e.writers > 0 {
		// A writer may be between makeRoomToGrow's reservation and its
		// begin (not yet in flight): an upload ending then must not take
		// its room away (end or settleCharge gives it back).
		n = max(n, e.charged)
	}
	c.chargeLocked(e, n)
}

// settleChargeLocked gives back what e reserved beyond its size once no
// change of it is in flight.
func (c *Cache) settleChargeLocked(e *entry) {
	if e.inflight == 0 && !e.dropped && e.charged > costOf(e.rec) {
		c.chargeLocked(e, costOf(e.rec))
	}
}

// Allocate makes sure the bytes [off, off+length) of the local copy have
// disk blocks (fallocate(2) mode 0): the file grows to off+length if it
// is shorter, and that growth is held to the limits like a write's.
func (h *WriteHandle) Allocate(off, length int64) error {
	end := off + length
	if end > h.c.MaxFileSize() || end < off {
		return h.c.tooBig(h.name(), end)
	}
	if end <= h.Size() {
		// The content does not change: no change to record.
		return fallocate(h.f, off, length)
	}
	if e := h.entry(); e != nil {
		if err := h.c.makeRoomToGrow(e, end); err != nil {
			return err
		}
	}
	if err := h.begin(func(r *record) bool { return r.MarkWritten(r.Size, end) }); err != nil {
		h.c.settleCharge(h)
		return err
	}
	err := fallocate(h.f, off, length)
	grown := int64(0)
	if err == nil {
		grown = end
	}
	h.end(grown)
	return err
}

func fallocate(f interface{ Fd() uintptr }, off, length int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), 0, off, length)
		if err != syscall.EINTR {
			return err
		}
	}
}

// settleCharge gives back what h's entry reserved for a change that did
// not begin.
func (c *Cache) settleCharge(h *WriteHandle) {
	c.mu.Lock()
	if !h.orphan {
		c.settleChargeLocked(h.e)
	}
	c.mu.Unlock()
}

// name is the name of the handle's file now.
func (h *WriteHandle) name() string {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return h.e.name
}

// hiddenHeadroom is the free space above its floor that the cache's disk
// keeps while files are open for writing through passthrough (hidden
// handles): what their writes may take between two counts (countHidden,
// every hiddenEvery) without meeting the disk's ENOSPC while clean
// copies could have been evicted for them. A disk that cannot keep it
// (small, or full of changes) gets no new hidden writers: writes go
// through the daemon, which holds each one to the floor and the cap.
const hiddenHeadroom = 1 << 30

// hiddenEvery is how often hidden handles are counted (countHidden).
const hiddenEvery = 100 * time.Millisecond

// RoomForHidden reports whether a writer the kernel serves itself
// (passthrough) may open now: the disk has hiddenHeadroom free above its
// floor, after evicting clean copies for it if need be. It does I/O
// (statfs, removals): call it with no lock held.
func (c *Cache) RoomForHidden() bool {
	c.refreshFree()
	c.mu.Lock()
	victims, ok := c.diskRoomLocked(hiddenHeadroom, false)
	c.mu.Unlock()
	c.removeAll(victims)
	return ok
}

// diskRoomLocked evicts clean copies, least recently used first, until
// the disk has need bytes free above its floor (as last measured), and
// reports whether it has. If it cannot have them, it evicts nothing,
// unless partial asks for what can be had.
func (c *Cache) diskRoomLocked(need int64, partial bool) ([]*entry, bool) {
	if c.freeAt.IsZero() {
		return nil, false // never measured
	}
	short := c.floor + need - (c.free + c.freeing)
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
// hiddenEvery instead of only at their Close. It stats files: call
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
	for h := range c.writeHandles {
		if h.hidden && !h.orphan {
			hs = append(hs, open{h.e, h.f})
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
	c.refreshFree()
	c.mu.Lock()
	for i, h := range hs {
		if sizes[i] > h.e.rec.Size && !h.e.dropped {
			c.resizeLocked(h.e, sizes[i])
		}
	}
	victims, _ := c.makeRoomLocked(0)
	more, _ := c.diskRoomLocked(hiddenHeadroom, true)
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

// chargeLocked sets what e counts in c.used to n bytes. Every byte that
// leaves c.used goes through here: a lower charge wakes the writers
// waiting for room (room.go).
func (c *Cache) chargeLocked(e *entry, n int64) {
	if n < e.charged {
		c.roomLocked()
	}
	c.used += n - e.charged
	e.charged = n
}
