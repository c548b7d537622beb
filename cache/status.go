package cache

import (
	"github.com/bucketfs/bucketfs/cache/internal/report"
)

// What an operator can see of a running cache: Status is one snapshot,
// taken under Cache.mu with no I/O, cheap enough to take on every metrics
// scrape. Its types, the ring of recent errors, what a file counts and
// where it is listed (Status.Add) and the order of the lists are package
// internal/report's; the facts of each entry are gathered here. The
// counters it adds to Stats live in Cache.stats (guarded by mu) except
// readBytes and fetched, atomics counted on the read path without the
// lock.

// The snapshot types are report's; callers of this package name them
// here.
type (
	Stats        = report.Stats
	FetchedBytes = report.FetchedBytes
	Status       = report.Status
	RefusedFile  = report.RefusedFile
	HeldFile     = report.HeldFile
	DirtyFile    = report.DirtyFile
	ErrorEvent   = report.ErrorEvent
)

// Status returns a snapshot of the cache, listing at most maxDirty dirty
// files.
func (c *Cache) Status(maxDirty int) Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Status{Stats: c.stats}
	s.Entries = len(c.entries)
	s.UsedBytes = c.budget.Used()
	s.ReadBytes = c.readBytes.Load()
	s.Fetched = c.fetcher.Fetched()
	for name, e := range c.entries {
		since := e.DirtySince
		if since.IsZero() {
			since = c.opened // dirty since before the start, or clean
		}
		s.Add(report.File{Name: name, Rec: &e.Rec, Charged: e.Charged, Walking: e.Fill.Walking(), Uploading: e.Uploading,
			Since: since, RefusedAt: e.RefusedAt, RefusedWhy: e.RefusedWhy}, maxDirty)
	}
	s.Queued = c.queue.Len()
	s.Uploading = c.queue.Running()
	s.Errors = c.recentErrs.Events()
	s.Order(maxDirty)
	return s
}

// Stats returns a snapshot of the counters: Status's, which counts them.
func (c *Cache) Stats() Stats { return c.Status(0).Stats }

// noteErrorLocked keeps err among the recent errors that Status lists.
func (c *Cache) noteErrorLocked(op, name string, err error) {
	c.recentErrs.Note(op, name, err)
}
