package cache

import (
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/report"
)

// What an operator can see of a running cache: Status is one snapshot,
// taken under Cache.mu with no I/O, cheap enough to take on every metrics
// scrape. Its types, the ring of recent errors and the order of its lists
// are package internal/report's; which entries it lists and what it
// counts are decided here. The counters it adds to Stats live in
// Cache.stats (guarded by mu) except readBytes and fetched, atomics
// counted on the read path without the lock.

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
		if e.fill.Walking() {
			s.Downloading++
		}
		if e.rec.Pinned {
			s.PinnedFiles++
			s.PinnedBytes += e.charged
		}
		if !e.rec.Dirty {
			continue
		}
		if why := e.rec.HeldWhy(); why != "" {
			s.DamagedFiles++
			s.Held = append(s.Held, HeldFile{Name: name, Why: why})
		}
		if e.refusedWhy != "" {
			s.Refused = append(s.Refused, RefusedFile{Name: name, Since: e.refusedAt, Why: e.refusedWhy})
		}
		s.DirtyFiles++
		size := dirtySize(e.rec)
		s.DirtyBytes += size
		since := e.dirtySince
		if since.IsZero() {
			since = c.opened
		}
		if s.OldestDirty.IsZero() || since.Before(s.OldestDirty) {
			s.OldestDirty = since
		}
		if maxDirty > 0 {
			s.Dirty = append(s.Dirty, DirtyFile{Name: name, Size: size, Since: since, Deleted: e.rec.Deleted, Uploading: e.uploading})
		}
	}
	s.Queued = c.queue.Len()
	s.Uploading = c.queue.Running()
	s.Errors = c.recentErrs.Events()
	s.Order(maxDirty)
	return s
}

// noteErrorLocked keeps err among the recent errors that Status lists.
func (c *Cache) noteErrorLocked(op, name string, err error) {
	c.recentErrs.Note(op, name, err)
}

// dirtiedLocked notes when e went from clean to changed.
func (e *entry) dirtiedLocked(now time.Time) {
	if e.dirtySince.IsZero() {
		e.dirtySince = now
	}
}

// dirtySize is what a changed file's record r counts in DirtyBytes, in
// Stats as in Status: its size, or nothing for a deletion (it sends no
// bytes and costs no room).
func dirtySize(r record) int64 {
	if r.Deleted {
		return 0
	}
	return r.Size
}
