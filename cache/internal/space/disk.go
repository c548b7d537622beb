package space

// The disk: its floor, its size above the floor, and its free space as
// last measured (statfs), less the growth reserved since and plus the
// bytes evicted since.

import (
	"fmt"
	"syscall"
	"time"
)

const (
	// FreeTTL is how long a statfs of the cache disk is trusted. Between
	// two, the growth reserved since is subtracted from it.
	FreeTTL = 250 * time.Millisecond
	// autoMinFree is the floor asked by a negative minFree: 5% of the
	// disk, at most this.
	autoMinFree = 1 << 30
)

// floorFor turns minFree into the floor for the disk of dir: a negative
// value asks for 5% of the disk, at most autoMinFree.
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

// DiskShort is how many bytes must be freed on the disk so that need more
// bytes leave the floor free (<= 0: none), as last measured; measured is
// false if the disk never was (nothing is then short: without a floor,
// or before the first measure, the disk's own ENOSPC is the limit).
func (b *Budget) DiskShort(need int64) (short int64, measured bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freeAt.IsZero() {
		return 0, false
	}
	return b.diskShortLocked(need), true
}

func (b *Budget) diskShortLocked(need int64) int64 {
	if b.floor <= 0 || b.freeAt.IsZero() {
		return 0
	}
	return b.floor + need - (b.free + b.freeing)
}

// Refresh measures the free space of the disk if the last measure is
// older than FreeTTL.
func (b *Budget) Refresh() { b.Measure(FreeTTL) }

// Measure measures the free space of the disk if the last measure is
// older than maxAge (0: always); without a floor, never. More free space
// than the last measure said wakes the writers waiting for room. It does
// I/O (statfs) with no lock held: a caller holds none of its own either.
func (b *Budget) Measure(maxAge time.Duration) {
	if b.floor <= 0 {
		return
	}
	b.mu.Lock()
	fresh := maxAge > 0 && time.Since(b.freeAt) < maxAge
	b.mu.Unlock()
	if fresh {
		return
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(b.dir, &st); err != nil {
		return // keep the last measure; the disk's own ENOSPC still holds
	}
	b.mu.Lock()
	free := int64(st.Bavail) * st.Bsize
	if free > b.free+b.freeing {
		b.wakeLocked()
	}
	b.free, b.freeAt, b.freeing = free, time.Now(), 0
	b.mu.Unlock()
}
