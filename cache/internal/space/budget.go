package space

import (
	"sync"
	"time"
)

// MaxObjectSize is the largest object GCS stores.
const MaxObjectSize = 5 << 40

const (
	// HiddenHeadroom is the free space above its floor that the cache's
	// disk keeps while files are open for writing through passthrough
	// (hidden handles): what their writes may take between two counts
	// (every HiddenEvery) without meeting the disk's ENOSPC while clean
	// copies could have been evicted for them. A disk that cannot keep
	// it (small, or full of changes) gets no new hidden writers: writes
	// go through the daemon, which holds each one to the floor and the
	// cap.
	HiddenHeadroom = 1 << 30
	// HiddenEvery is how often hidden handles are counted.
	HiddenEvery = 100 * time.Millisecond
)

// Budget is the space of one cache: its cap and what is charged against
// it, the disk's floor and its free space as last measured, the writers
// waiting for room, and the pressure of changed files. Its methods are
// safe for concurrent use; see the package comment for its lock.
type Budget struct {
	dir     string // measured by statfs (the cache's data directory)
	max     int64  // the cap: bytes of object data kept
	floor   int64  // free bytes kept on the disk; 0: none
	diskCap int64  // the most the disk can ever hold above the floor; 0: no bound

	mu         sync.Mutex
	used       int64     // the sum of the charges (Charge)
	free       int64     // free bytes on the disk at freeAt, less the growth reserved since
	freeAt     time.Time // when free was measured; zero: never
	freeing    int64     // bytes evicted since freeAt (Evicted)
	pressureAt time.Time // when Pressure last counted changed bytes
	pressure   bool      // changed bytes were near the cap then
	room       chan struct{}
	waiters    int // writers between Watch and Unwatch
}

// New returns the budget of a cache of at most max bytes whose data
// lives in dir, keeping minFree bytes free on dir's disk: 0 for none,
// negative for 5% of the disk, at most 1 GiB. It measures the disk's
// size (statfs) if there is a floor, but not yet its free space
// (Refresh).
func New(dir string, max, minFree int64) (*Budget, error) {
	floor, err := floorFor(dir, minFree)
	if err != nil {
		return nil, err
	}
	return &Budget{
		dir: dir, max: max, floor: floor, diskCap: diskCapFor(dir, floor),
		room: make(chan struct{}),
	}, nil
}

// Max is the cap.
func (b *Budget) Max() int64 { return b.max }

// Floor is the free space kept on the disk (0: none).
func (b *Budget) Floor() int64 { return b.floor }

// MaxFileSize is the largest file the cache holds: the cap, at most
// MaxObjectSize, and with a floor, at most what the disk holds above it.
// A file past that could never get its room.
func (b *Budget) MaxFileSize() int64 {
	n := min(b.max, MaxObjectSize)
	if b.diskCap > 0 {
		n = min(n, b.diskCap)
	}
	return n
}

// Used is the sum of the charges.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Charge moves one holder's charge from from to to bytes (the caller
// keeps each holder's charge). Every byte that leaves Used goes through
// here: a lower charge wakes the writers waiting for room.
func (b *Budget) Charge(from, to int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if to < from {
		b.wakeLocked()
	}
	b.used += to - from
}

// Evicted counts n bytes evicted: their files are about to leave the
// disk, which the next measure will see.
func (b *Budget) Evicted(n int64) {
	b.mu.Lock()
	b.freeing += n
	b.mu.Unlock()
}

// TryReserve reports how many bytes need more bytes are over the cap or
// under the floor (<= 0: none); if none, it reserves them on the disk
// until the next measure says better.
func (b *Budget) TryReserve(need int64) (over int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	over = b.overLocked(need)
	if over <= 0 {
		b.free -= need
	}
	return over
}

// Reserve reserves need more bytes on the disk (room made for them by
// eviction) until the next measure says better.
func (b *Budget) Reserve(need int64) {
	b.mu.Lock()
	b.free -= need
	b.mu.Unlock()
}

// overLocked is how many bytes need more bytes are over the cap or
// under the floor (<= 0: none).
func (b *Budget) overLocked(need int64) int64 {
	return max(b.used+need-b.max, b.diskShortLocked(need))
}
