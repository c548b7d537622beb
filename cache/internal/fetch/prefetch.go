package fetch

import (
	"context"
	"errors"

	"github.com/bucketfs/bucketfs/cache/internal/read"
	"github.com/bucketfs/bucketfs/transfer"
)

// Prefetcher is what a prefetch needs of the cache it fills, for entries
// of type E. Package cache implements it. Its methods are called with no
// lock held; Known, Start and Failed are each one critical section of
// the cache's lock.
type Prefetcher[E any] interface {
	// Known reports whether the cache holds an entry for name (in any
	// state) or is closed.
	Known(name string) bool

	// Acquire finds or creates the entry for version a and takes a
	// reference to it, with ctx marked ForPrefetch: it evicts nothing,
	// and returns ErrNoRoom if the version does not fit in free room. It
	// reports whether it created the entry (and its empty data file).
	Acquire(ctx context.Context, a transfer.ObjectAttrs) (e E, created bool, err error)

	// Release drops the reference Acquire took.
	Release(e E)

	// Start returns e's download, made now and its walk started whole
	// (transfer.FetchWhole) if e has none; nil if e's copy is complete,
	// holds local changes or was dropped: there is nothing to fetch.
	Start(e E) (*transfer.Download, error)

	// Failed is told that the prefetch of e fetched nothing usable: e no
	// longer counts as prefetched (Fill.Unprefetched). If stale (the
	// version is gone from the bucket), the prefetch's reference is the
	// only one and e holds no change, e is dropped, so that no copy of
	// the version stays behind; the release that follows removes it.
	Failed(e E, stale bool)
}

// Prefetch fetches version a of an object whole into the cache c, unless
// the cache holds an entry for the name already (in any state), is
// closed, or has no free room for it without evicting. It returns
// whether it fetched, once the copy is complete and has passed its
// check (the download's checksum check, as for any open). A version
// gone from the bucket returns read.ErrStale; the open that follows
// meets it again and answers as usual.
func Prefetch[E any](ctx context.Context, c Prefetcher[E], a transfer.ObjectAttrs) (bool, error) {
	if c.Known(a.Name) || a.Size <= 0 || a.Generation <= 0 {
		return false, nil
	}
	e, created, err := c.Acquire(ForPrefetch(ctx), a)
	if errors.Is(err, ErrNoRoom) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer c.Release(e)
	if !created {
		return false, nil // made by an open meanwhile: that open fetches it
	}
	dl, err := c.Start(e)
	if dl == nil || err != nil {
		return false, err
	}
	if err := dl.EnsureComplete(ctx); err != nil {
		err = read.StaleOr(err)
		c.Failed(e, errors.Is(err, read.ErrStale))
		return false, err
	}
	return true, nil
}
