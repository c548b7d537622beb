package cache

import (
	"context"
	"errors"
	"sort"
	"time"
)

// What an operator can see of a running cache: Status is one snapshot,
// taken under Cache.mu with no I/O, cheap enough to take on every metrics
// scrape. The counters it adds to Stats live in Cache.stats (guarded by
// mu) except readBytes, an atomic counted on the read path without the
// lock.

// Status is a snapshot of the cache and of its write-back.
type Status struct {
	Stats

	// OldestDirty is when the longest-waiting change not yet in the
	// bucket was made (its file went from clean to changed); zero when
	// nothing is dirty. A change found at start (left by the last run)
	// counts from the start.
	OldestDirty time.Time
	Queued      int // names waiting in the upload queue (for their write-back delay, a retry, or a slot)
	Uploading   int // uploads and deletions being sent now
	Downloading int // object downloads running now

	// Dirty lists up to the number of files asked for, oldest first.
	Dirty []DirtyFile
	// Errors are the most recent write-back and download failures,
	// oldest first (at most maxRecentErrors).
	Errors []ErrorEvent
	// Held lists every changed file held for a failed checksum check
	// (see Resolve), by name.
	Held []HeldFile
	// Refused lists the changed files whose last upload the bucket
	// refused in a way a person can fix (credentials, a missing
	// bucket): they are tried again every few minutes (refusal.go).
	Refused []RefusedFile
}

// RefusedFile is a changed file whose last upload the bucket refused.
type RefusedFile struct {
	Name  string
	Since time.Time // the refusal
	Why   string
}

// HeldFile is a changed file that failed its checksum check.
type HeldFile struct {
	Name string
	Why  string
}

// DirtyFile is one file with changes not yet in the bucket.
type DirtyFile struct {
	Name      string
	Size      int64
	Since     time.Time // when it became dirty
	Deleted   bool      // the change is a deletion
	Uploading bool      // being sent now
}

// ErrorEvent is one failure that the log reported.
type ErrorEvent struct {
	Time   time.Time
	Op     string // "upload", "delete", "download", "conflict", "copy", "check"
	Object string
	Err    string
}

// maxRecentErrors is how many ErrorEvents Status keeps.
const maxRecentErrors = 20

// Status returns a snapshot of the cache, listing at most maxDirty dirty
// files.
func (c *Cache) Status(maxDirty int) Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Status{Stats: c.stats}
	defer func() {
		sort.Slice(s.Held, func(i, j int) bool { return s.Held[i].Name < s.Held[j].Name })
		sort.Slice(s.Refused, func(i, j int) bool { return s.Refused[i].Name < s.Refused[j].Name })
	}()
	s.Entries = len(c.entries)
	s.UsedBytes = c.budget.Used()
	s.ReadBytes = c.readBytes.Load()
	s.Fetched = c.fetchedBytes()
	var dirty []DirtyFile
	for name, e := range c.entries {
		if e.dl != nil && !e.dlIdle {
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
		size := e.rec.Size
		if e.rec.Deleted {
			size = 0 // a deletion sends no bytes (and costs no room)
		}
		s.DirtyBytes += size
		since := e.dirtySince
		if since.IsZero() {
			since = c.opened
		}
		if s.OldestDirty.IsZero() || since.Before(s.OldestDirty) {
			s.OldestDirty = since
		}
		if maxDirty > 0 {
			dirty = append(dirty, DirtyFile{Name: name, Size: size, Since: since, Deleted: e.rec.Deleted, Uploading: e.uploading})
		}
	}
	s.Queued = len(c.queue)
	s.Uploading = len(c.inFlight)
	sort.Slice(dirty, func(i, j int) bool {
		if !dirty[i].Since.Equal(dirty[j].Since) {
			return dirty[i].Since.Before(dirty[j].Since)
		}
		return dirty[i].Name < dirty[j].Name
	})
	if len(dirty) > maxDirty {
		dirty = dirty[:maxDirty]
	}
	s.Dirty = dirty
	s.Errors = append([]ErrorEvent(nil), c.recentErrs...)
	return s
}

// noteErrorLocked keeps err among the recent errors.
func (c *Cache) noteErrorLocked(op, name string, err error) {
	if len(c.recentErrs) == maxRecentErrors {
		copy(c.recentErrs, c.recentErrs[1:])
		c.recentErrs = c.recentErrs[:maxRecentErrors-1]
	}
	c.recentErrs = append(c.recentErrs, ErrorEvent{Time: time.Now(), Op: op, Object: name, Err: err.Error()})
}

// dirtiedLocked notes when e went from clean to changed.
func (e *entry) dirtiedLocked(now time.Time) {
	if e.dirtySince.IsZero() {
		e.dirtySince = now
	}
}

// isCancel reports whether err is only the end of a context.
func isCancel(err error) bool {
	return errors.Is(err, context.Canceled)
}
