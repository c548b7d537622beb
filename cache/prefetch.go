package cache

// Prefetch: whole small objects fetched before they are opened (the
// file system decides which, fs/prefetch.go), into free room only: a
// prefetch never evicts. The sequence is internal/fetch's
// (fetch.Prefetch); here, the entries' side.

import (
	"context"

	"github.com/bucketfs/bucketfs/cache/internal/fetch"
	"github.com/bucketfs/bucketfs/transfer"
)

// Prefetch fetches version a of an object whole into the cache if it has
// free room and no copy of the name, and reports whether it fetched
// (fetch.Prefetch). A version gone from the bucket returns ErrStale.
func (c *Cache) Prefetch(ctx context.Context, a transfer.ObjectAttrs) (bool, error) {
	return fetch.Prefetch(ctx, prefetchLedger{c}, a)
}

// prefetchLedger is the entries' side of a prefetch (fetch.Prefetcher).
type prefetchLedger struct{ c *Cache }

func (l prefetchLedger) Known(name string) bool {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	_, have := l.c.entries[name]
	return have || l.c.closed
}

func (l prefetchLedger) Acquire(ctx context.Context, a transfer.ObjectAttrs) (*entry, bool, error) {
	return l.c.acquireCreated(ctx, a, false)
}

func (l prefetchLedger) Release(e *entry) { l.c.release(e) }

func (l prefetchLedger) Start(e *entry) (*transfer.Download, error) {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	if e.Rec.Complete || e.Rec.LocalContent() || e.Dropped {
		return nil, nil
	}
	return l.c.downloadLocked(e, transfer.FetchWhole, true)
}

func (l prefetchLedger) Failed(e *entry, stale bool) {
	c := l.c
	c.mu.Lock()
	e.Fill.Unprefetched()
	var victims []*entry
	if stale && e.Refs == 1 && !e.Rec.Dirty && !e.Rec.LocalContent() {
		// The version is gone (overwritten, deleted, renamed since
		// the listing): no copy of it stays behind. The last
		// release (the deferred one) removes the file.
		victims = c.dropLocked(e)
	}
	c.mu.Unlock()
	c.removeAll(victims)
}

// roomForLocked makes room for need more bytes, as makeRoomLocked does,
// but for a prefetch only from free room: nothing is evicted for it.
func (c *Cache) roomForLocked(ctx context.Context, need int64) ([]*entry, bool) {
	if !fetch.Prefetching(ctx) {
		return c.makeRoomLocked(need)
	}
	if c.budget.TryReserve(need) > 0 {
		return nil, false
	}
	return nil, true
}

// notePrefetchWasteLocked counts a prefetched copy that leaves the cache
// (evicted, dropped, or the cache closed) before any open took it.
func (c *Cache) notePrefetchWasteLocked(e *entry) {
	c.stats.PrefetchWastedBytes += e.Fill.Wasted(e.Rec.Size)
}
