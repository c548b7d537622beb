package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/writeback"
	"github.com/bucketfs/bucketfs/transfer"
)

// Write-back: local changes land in the cache file at once and reach the
// bucket later, in the background.
//
// The durability contract is written once, for users and for this code:
// docs/design.md, "Writing: the durability contract". In short: a change
// is recorded as dirty before its first byte is written; an upload marks
// clean only the version it sent, and only if nothing changed while it
// ran; uploads are conditional on the generation the change is based on
// (a conflict keeps both versions); a changed file is never evicted or
// removed; failed uploads are retried forever.

// ErrNoSpace means a file to be written does not fit in the cache.
var ErrNoSpace = errors.New("the file does not fit in the cache")

// Remove records that name is deleted; the deletion reaches the bucket in
// order with name's other changes (an upload in flight ends first; a new
// file of the same name replaces the deletion). base is the generation
// the application deleted (-1: whatever is there). When Remove returns,
// the deletion survives a crash. Handles still open keep their data.
//
// A deletion takes no room: the room of the file deleted is free when
// Remove returns (for the writers waiting for it too). A deletion of a
// name the bucket never had is settled here, with no request. If it
// cannot be recorded (a full disk), it fails and changes nothing: it is
// recorded in the journal first, and only then takes effect.
func (c *Cache) Remove(ctx context.Context, name string, base int64) error {
	e, created, err := c.acquireCreated(ctx, transfer.ObjectAttrs{Name: name, Generation: base}, false)
	if err != nil {
		return err
	}
	if e == nil {
		return fmt.Errorf("%s: %w", name, ErrNoSpace)
	}
	defer c.release(e)
	// No other state of the record may reach the journal between the
	// deletion's entry and its taking effect (see Rename).
	e.PersistMu.Lock()
	c.mu.Lock()
	rec := deletionOf(e.Rec, base)
	for {
		c.mu.Unlock()
		if err := c.j.Append(durable.PutOp(name, rec, rec.ID)); err != nil {
			e.PersistMu.Unlock()
			if created {
				c.forget(e) // made only for this deletion: nothing of it stays
			}
			return fmt.Errorf("recording the deletion of %s: %w", name, err)
		}
		c.mu.Lock()
		// An upload of the name may have ended while the journal was
		// written (it changes the record in memory before it waits for
		// PersistMu): the deletion must be based on the version it put
		// there, or its precondition fails and the file comes back. The
		// entry written again supersedes the one just written.
		now := deletionOf(e.Rec, base)
		if now.Generation == rec.Generation && slices.Equal(now.Attempts, rec.Attempts) {
			break
		}
		rec = now
	}
	cur := &e.Rec
	cur.Generation, cur.Deleted, cur.MetaOnly, cur.Dirty = rec.Generation, true, false, true
	cur.Size = rec.Size                                 // nothing: the cache file is emptied below
	cur.CopyFrom, cur.CopyGen, cur.CopyType = "", 0, "" // a copy never made needs no source
	cur.Meta = nil                                      // a file made again under the name starts without the old one's
	cur.Complete, cur.Present = true, nil
	cur.Damaged, cur.Sums, cur.Written = rec.Damaged, rec.Sums, rec.Written // a held file deleted is held no more
	cur.Refused = rec.Refused
	// Handles open on the file keep their copy, as on a local disk.
	c.orphanLocked(e)
	c.chargeLocked(e, costOf(rec)) // nothing; the writers waiting for room wake
	c.deletedLocked(e, time.Now())
	e.PersistedSeq = e.RecSeq // PersistMu is held: the journal entry is the newest write
	version := e.Version
	c.mu.Unlock()
	e.PersistMu.Unlock()
	if err := c.detachData(rec.ID, name, rec); err != nil {
		c.log.Warn("detaching a deleted file's cache file failed", "object", name, "err", err)
	}
	c.settleUnsentDeletion(e, name, version)
	return nil
}

// settleUnsentDeletion settles the deletion of name that Remove recorded
// (e.Version was version then) if the bucket never had the name: never
// uploaded (based on no generation) and no upload of it sent that may
// have reached the bucket. There is nothing to delete there, so the
// deletion ends here, with no request, as deleteDone would end it.
// Any other deletion is left to the uploader: one whose name is being
// sent, waits for a directory rename, or is a directory's placeholder
// (it goes after the changes under it, and prunes the bucket's folders).
// The deletion is in the journal and the file detached already, so a
// crash before this leaves a deletion that the next start settles the
// same way.
func (c *Cache) settleUnsentDeletion(e *entry, name string, version uint64) {
	c.mu.Lock()
	ok := c.unsentDeletionLocked(e, name, version)
	c.mu.Unlock()
	if !ok {
		return
	}
	// Before the deletion leaves the local overlay, as in a deletion
	// sent (internal/upload: delete.go), and true whatever happens next:
	// the bucket has nothing at the name from this cache.
	c.confirm(name, transfer.ObjectAttrs{}, true)
	c.mu.Lock()
	var victims []*entry
	if c.unsentDeletionLocked(e, name, version) && c.settleLocked(e, name, version, 0, true) {
		c.queue.Remove(name)
		victims = c.dropLocked(e) // a create holding it makes the file again (see OpenWrite)
		c.notifyLocked()
	}
	c.mu.Unlock()
	c.removeAll(victims)
}

// unsentDeletionLocked reports whether e, name's entry, is still the
// deletion settleUnsentDeletion may settle (e.Version was version then).
func (c *Cache) unsentDeletionLocked(e *entry, name string, version uint64) bool {
	return c.entries[name] == e && e.Version == version && e.Inflight == 0 &&
		e.Rec.Deleted && e.Rec.Dirty && e.Rec.Generation == 0 && len(e.Rec.Attempts) == 0 &&
		!e.Uploading && !c.queue.InFlight(name) && !strings.HasSuffix(name, "/") && !c.mustWaitLocked(e, name)
}

// deletionOf is record r once its name is deleted, based on generation
// base.
func deletionOf(r record, base int64) record {
	if !r.Dirty && (base > r.Generation || base < 0) {
		r.Generation = base
	}
	r.Deleted, r.MetaOnly, r.Dirty = true, false, true
	r.Damaged, r.Sums, r.Written = "", nil, nil // no bytes to check, nothing held
	r.Refused = ""
	r.CopyFrom, r.CopyGen, r.CopyType = "", 0, ""
	r.Meta = nil
	r.Complete, r.Present, r.Size = true, nil, 0
	return r
}

// detachData gives cache file id a new, empty inode. What holds the old
// one keeps its bytes: the new name of a renamed file (a hard link to
// it), and handles open on a deleted file. A name deleted and then written
// again so never writes into either. Called only after the deletion is
// in the journal: before, the bytes may still be needed.
//
// The new inode gets the deletion's description (durable.Describer.Detach):
// the one the journal entry owed it, else the old inode's if it is still
// id's own, else rec's (name's record).
func (c *Cache) detachData(id uint64, name string, rec record) error {
	return c.desc.Detach(id, durable.Describe(name, rec))
}

// Progress reports what Flush still has to upload.
type Progress = writeback.Progress

// Flush uploads every local change now, ignoring the write-back delay,
// and waits until none is left or ctx ends. progress, if not nil, is
// called whenever the amount left changes. It returns the names still
// dirty (nil when everything is in the bucket); it returns early, with
// them, once every file left is held or was refused by the bucket since
// the call (refusal.go): no wait would send them.
func (c *Cache) Flush(ctx context.Context, progress func(Progress)) []string {
	return c.loops.Flush(ctx, progress)
}

// SendAll queues every dirty name to be sent now (Flush).
func (l writebackLedger) SendAll() {
	c := l.c
	c.mu.Lock()
	for name, e := range c.entries {
		if e.Rec.Dirty {
			c.queue.SendNow(name)
		}
	}
	c.notifyLocked()
	c.mu.Unlock()
}

// Left counts the dirty names for Flush. Files held, or refused by the
// bucket since the flush began, are stuck: no upload to wait for
// (refusal.go).
func (l writebackLedger) Left(since time.Time) (left Progress, names []string, stuck int, wake <-chan struct{}) {
	c := l.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, e := range c.entries {
		if e.Rec.Dirty {
			left.Files++
			left.Bytes += e.Rec.Size
			names = append(names, name)
			if e.StuckSince(since) {
				stuck++
			}
		}
	}
	return left, names, stuck, c.changed
}

// FlushName uploads name's changes now, even while it is open for
// writing, and waits until an upload that started after the call has
// succeeded (nil: everything written before the call is in the bucket),
// or ctx ends. While the bucket is offline it fails at once
// (transfer.ErrOffline): the change is safe in the cache and queued.
func (c *Cache) FlushName(ctx context.Context, name string) error {
	return c.loops.FlushName(ctx, name)
}

// flushing is one FlushName's wait.
type flushing = writeback.Flushing[*entry]

// Force starts a FlushName: the next upload of name goes even while it
// is open for writing, and is sent now.
func (l writebackLedger) Force(name string) (flushing, bool, error) {
	c := l.c
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[name]
	if e == nil || !e.Rec.Dirty {
		return flushing{}, false, nil
	}
	if e.Rec.Damaged != "" {
		return flushing{}, false, fmt.Errorf("%s: %w: %s", name, ErrDamaged, e.Rec.Damaged)
	}
	f := flushing{Entry: e, Name: name, Since: time.Now(), Target: e.UploadSeq + 1}
	e.Forced = true
	c.queue.SendNow(name)
	c.notifyLocked()
	return f, true, nil
}

// Flushed reports whether f's upload is done, or why it cannot be.
func (l writebackLedger) Flushed(f flushing) (done bool, wake <-chan struct{}, err error) {
	c, e, name := l.c, f.Entry, f.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.Rec.Damaged != "" && !e.Dropped {
		return false, nil, fmt.Errorf("%s: %w: %s", name, ErrDamaged, e.Rec.Damaged)
	}
	done = e.Dropped || !e.Rec.Dirty || e.UploadedSeq >= f.Target
	if !done && e.StuckSince(f.Since) {
		why := e.Rec.HeldWhy()
		if why == "" {
			why = e.RefusedWhy
		}
		return false, nil, fmt.Errorf("%s: %w: %s", name, ErrRefused, why)
	}
	if !done && !e.Uploading {
		// Re-arm after a failed try (it was queued again with a delay
		// that the writers may have made it skip). A name no longer
		// queued is queued again the way any is, which wakes the
		// uploader if it would sleep past it (idle, up to an hour).
		e.Forced = true
		if !c.queue.Queued(name) {
			c.scheduleLocked(name, time.Second)
		}
	}
	return done, c.changed, nil
}
