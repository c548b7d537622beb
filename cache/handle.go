package cache

import (
	"fmt"
	"os"
	"slices"

	"github.com/bucketfs/bucketfs/cache/internal/integrity"
	"github.com/bucketfs/bucketfs/cache/internal/read"
	"github.com/bucketfs/bucketfs/cache/internal/verify"
	"github.com/bucketfs/bucketfs/transfer"
)

// Handle reads one object version through the cache (package
// internal/read). Its methods are safe for concurrent use; Close must be
// called exactly once.
type Handle = read.Handle

// handleCache is what a Handle needs of the cache (read.Cache) for
// entry e, the copy it reads; e is nil for a handle that reads from the
// bucket directly, which only counts what it fetches.
type handleCache struct {
	c    *Cache
	e    *entry
	name string // the name the handle was opened by (its errors say it)
}

// directHandle is a handle of version a, which does not fit in the cache:
// read from the bucket directly.
func (c *Cache) directHandle(a transfer.ObjectAttrs) *Handle {
	return read.New(read.Params{
		Cache: &handleCache{c: c}, Bucket: c.b,
		Name: a.Name, Generation: a.Generation, Size: a.Size, ChunkSize: c.opts.ChunkSize,
		Encoded: a.ContentEncoding != "",
	})
}

// CheckRange checks the chunks of e's copy that n bytes at off touch
// (verify.Chunks). If one is bad (or was dropped as bad), the bytes are read
// from the bucket instead: the handle's own version, or the source of a
// pending copy as it was before the check; a held file answers
// ErrDamaged.
func (hc *handleCache) CheckRange(f *os.File, off, n int64) (bool, read.Version, error) {
	c, e := hc.c, hc.e
	c.mu.Lock()
	chunk := e.Rec.ChunkSize
	var from read.Version
	if e.Rec.PendingCopy() {
		from = read.Version{Name: e.Rec.CopyFrom, Generation: e.Rec.CopyGen}
	}
	c.mu.Unlock()
	first, last := integrity.Touched(off, n, chunk)
	good := verify.Chunks(verifyLedger{c, e}, f, first, last)
	if !slices.Contains(good, false) {
		return true, read.Version{}, nil
	}
	c.mu.Lock()
	why := e.Rec.Damaged
	c.mu.Unlock()
	if why != "" {
		return false, read.Version{}, fmt.Errorf("%s: %w: %s", hc.name, ErrDamaged, why)
	}
	return false, from, nil
}

// Promote makes dl, e's download, a whole fetch (promote).
func (hc *handleCache) Promote(dl *transfer.Download) { hc.c.promote(hc.e, dl, transfer.FetchWhole) }

// Release drops the handle's reference to e (release).
func (hc *handleCache) Release() { hc.c.release(hc.e) }

// CountRead counts n bytes read from a local copy (Stats.ReadBytes).
func (hc *handleCache) CountRead(n int64) { hc.c.readBytes.Add(n) }

// CountFetched counts n bytes fetched for why (fetch.Fetcher.Count).
func (hc *handleCache) CountFetched(why transfer.FetchReason, n int64) { hc.c.fetcher.Count(why, n) }
