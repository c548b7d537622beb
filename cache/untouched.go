package cache

import (
	"maps"
	"os"
	"slices"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/write"
)

// An open for writing that writes nothing, through passthrough: the
// entry's side. The mark on the cache file, and why, is package
// internal/write's (mark.go). An open of a clean copy that no other
// handle writes is watched; the daemon's own changes (a truncation,
// fallocate) are counted (entry.changes). At the close, a file with its
// size and its mark, in an entry no other change reached (no other
// writer, no rename, no upload), is not changed: its record before the
// open is restored (clean, with its checksums), with the attributes set
// meanwhile, if any (then only they are sent: a metadata patch, as for
// touch).
//
// A time set while the mark holds (touch's futimens, through SetMeta) is
// kept in the record's metadata, not set on the file (that would wipe
// the mark), and Local shows it. Set once the mark is gone, it goes on
// the file as for any changed file. A kernel write racing with it ends
// later, or shows later: either order is one the two calls could have
// had.

// untouched is what a hidden handle's open of a clean copy kept to undo
// its change at the close. Its fields are set before the handle is
// shared (the mark by write.Handle.BeginHidden), except timed, guarded
// by Cache.mu.
type untouched struct {
	write.Mark
	e       *entry
	prev    record // e's record before the open
	changes uint64 // e.Changes when the open joined e, then once the handle's change began (Watch)
	uploads uint64 // e.UploadSeq then: an upload during the open (fsync with --fsync remote) made a new generation
	timed   bool   // a time was set (SetMeta) while the mark held: it is in the record's metadata
}

// untouchedLocked returns the watch of a hidden handle about to begin
// its change of e, if e is a clean copy of a version in the bucket that
// no other handle writes, or nil. The handle's BeginHidden marks the
// file.
func untouchedLocked(e *entry) *untouched {
	r := e.Rec
	if r.Dirty || e.Dirtying != nil || r.Deleted || r.MetaOnly || r.CopyFrom != "" || r.Generation <= 0 || e.Writers != 1 {
		return nil
	}
	prev := r
	prev.Meta = maps.Clone(r.Meta)
	prev.Sums, prev.Written = slices.Clone(r.Sums), slices.Clone(r.Written)
	prev.Present, prev.Attempts = slices.Clone(r.Present), slices.Clone(r.Attempts)
	return &untouched{e: e, prev: prev, changes: e.Changes, uploads: e.UploadSeq}
}

// Watch takes up w's watch once its change has begun (write.Cache):
// only if no other change (another handle's write, which the mark
// cannot tell from the file as it was), no upload and no rename reached
// the watch's entry since the open joined it, else there is nothing to
// undo at the close. It reports whether the watch holds.
func (w *writeLedger) Watch() bool {
	c, u := w.c, w.untouched
	c.mu.Lock()
	defer c.mu.Unlock()
	e := u.e
	if w.e != e || w.orphan || e.Changes != u.changes+1 || e.UploadSeq != u.uploads {
		w.untouched = nil
		return false
	}
	u.changes = e.Changes
	e.watch = u
	return true
}

// shownTimeLocked is the modification time of u's file while its mark
// holds: the time set since (in meta), or the file's before the mark.
func (u *untouched) shownTimeLocked(meta map[string]string) time.Time {
	if u.timed {
		if t, ok := ParseMtime(meta[MtimeKey]); ok {
			return t
		}
	}
	return u.Time()
}

// keepMark is SetMeta's question before it sets the time of e's file
// (path): if an open that has written nothing watches it, and the mark
// still holds, the time stays in the metadata (true); else the watch
// ends and the time goes on the file (false). Call it with no lock held.
func (c *Cache) keepMark(e *entry, path string) bool {
	c.mu.Lock()
	u := e.watch
	c.mu.Unlock()
	if u == nil {
		return false
	}
	st, err := os.Stat(path)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.watch != u {
		return false
	}
	if err != nil || !u.Holds(st) {
		e.watch = nil
		return false
	}
	u.timed = true
	return true
}

// Untouched ends w's change, undoing it if nothing was written (see the
// top of this file): holds says the mark was on f just before. It
// reports whether it did (write.Cache). It is called by the handle's
// Close, instead of End, with no lock held.
func (w *writeLedger) Untouched(f *os.File, holds bool) bool {
	u := w.untouched
	c := w.c
	c.mu.Lock()
	if u.e.watch == u {
		u.e.watch = nil
	}
	e := w.e
	if !holds || w.orphan || e != u.e || e.Dropped || w.busy != 1 || e.Inflight != 1 ||
		e.Changes != u.changes || e.UploadSeq != u.uploads || e.Writers != 1 || !e.Rec.Dirty || e.Rec.MetaOnly || e.Rec.Size != u.prev.Size {
		c.mu.Unlock()
		return false
	}
	w.busy--
	e.Inflight--
	e.Version++
	meta := e.Rec.Meta
	e.Rec = u.prev
	fileTime := u.Time()
	if maps.Equal(meta, u.prev.Meta) {
		e.Dirtying, e.DirtySince = nil, time.Time{}
	} else {
		// Attributes were set meanwhile (touch): they alone are sent.
		e.Rec.Meta, e.Rec.Dirty, e.Rec.MetaOnly = meta, true, true
		e.Dirtying = make(chan struct{})
		close(e.Dirtying)
		fileTime = u.shownTimeLocked(meta)
	}
	c.settleChargeLocked(e)
	rec, seq := e.Snapshot()
	c.mu.Unlock()
	if err := c.persistEntry(e, rec, seq); err != nil {
		// The index still says the content changed: it is sent, the same
		// bytes.
		c.mu.Lock()
		e.Rec.Dirty, e.Rec.MetaOnly = true, false
		e.Rec.Sums, e.Rec.Written = nil, nil
		e.Dirtied(time.Now())
		c.mu.Unlock()
		c.log.Warn("recording that a file opened for writing was not changed failed; it is uploaded again", "object", e.Name, "err", err)
	}
	if err := os.Chtimes(f.Name(), time.Time{}, fileTime); err != nil {
		c.log.Debug("setting a cache file's modification time back failed", "object", e.Name, "err", err)
	}
	return true
}
