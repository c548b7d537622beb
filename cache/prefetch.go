package cache

// Prefetch: whole small objects fetched into the cache before they are
// opened (the file system decides which, fs/prefetch.go). A prefetch never
// evicts: it takes only room the cache has free.

import (
	"context"
	"errors"

	"github.com/bucketfs/bucketfs/transfer"
)

// prefetchKey marks the context of a prefetch's acquire: no eviction, no
// uncached fallback.
type prefetchKey struct{}

func prefetching(ctx context.Context) bool { return ctx.Value(prefetchKey{}) != nil }

// errNoRoom is why a prefetch fetched nothing: the cache has no free room
// for it without evicting.
var errNoRoom = errors.New("no free room in the cache for a prefetch")

// Prefetch fetches version a of an object whole into the cache, unless
// the cache holds a copy of the name already (in any state) or has no
// free room for it without evicting. It returns whether it fetched, once
// the copy is complete and has passed its check (the download's checksum
// check, as for any open). A version gone from the bucket returns
// ErrStale; the open that follows meets it again and answers as usual.
func (c *Cache) Prefetch(ctx context.Context, a transfer.ObjectAttrs) (bool, error) {
	c.mu.Lock()
	_, have := c.entries[a.Name]
	closed := c.closed
	c.mu.Unlock()
	if have || closed || a.Size <= 0 || a.Generation <= 0 {
		return false, nil
	}
	e, created, err := c.acquireCreated(context.WithValue(ctx, prefetchKey{}, true), a, false)
	if errors.Is(err, errNoRoom) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer c.release(e)
	if !created {
		return false, nil // made by an open meanwhile: that open fetches it
	}
	c.mu.Lock()
	if e.rec.Complete || e.rec.LocalContent() || e.dropped {
		c.mu.Unlock()
		return false, nil
	}
	if e.dl == nil {
		if err := c.startWholeLocked(e, transfer.FetchWhole); err != nil {
			c.mu.Unlock()
			return false, err
		}
	}
	dl := e.dl
	c.mu.Unlock()
	if err := dl.EnsureComplete(ctx); err != nil {
		err = staleOr(err)
		c.mu.Lock()
		e.prefetched = false // nothing usable was fetched
		var victims []*entry
		if errors.Is(err, ErrStale) && e.refs == 1 && !e.rec.Dirty && !e.rec.LocalContent() {
			// The version is gone (overwritten, deleted, renamed since
			// the listing): no copy of it stays behind. The last
			// release (the deferred one) removes the file.
			victims = c.dropLocked(e)
		}
		c.mu.Unlock()
		c.removeAll(victims)
		return false, err
	}
	return true, nil
}

// roomForLocked makes room for need more bytes, as makeRoomLocked does,
// but for a prefetch only from free room: nothing is evicted for it.
func (c *Cache) roomForLocked(ctx context.Context, need int64) ([]*entry, bool) {
	if !prefetching(ctx) {
		return c.makeRoomLocked(need)
	}
	if c.budget.TryReserve(need) > 0 {
		return nil, false
	}
	return nil, true
}

// notePrefetchUseLocked counts a prefetched copy as used the first time
// an open (not another prefetch) takes it.
func (c *Cache) notePrefetchUseLocked(ctx context.Context, e *entry) {
	if e.prefetched && !prefetching(ctx) {
		e.prefetched = false
		c.stats.PrefetchUsedBytes += e.rec.Size
	}
}

// notePrefetchWasteLocked counts a prefetched copy that leaves the cache
// (evicted, dropped, or the cache closed) before any open took it.
func (c *Cache) notePrefetchWasteLocked(e *entry) {
	if e.prefetched {
		e.prefetched = false
		c.stats.PrefetchWastedBytes += e.rec.Size
	}
}
