package cache

// One upload and its settling: a change of a name (content, deletion,
// conflict copy, metadata patch) sent to the bucket, and the entry
// updated for the outcome. The conversation with the bucket is package
// internal/upload's (upload.Flow): what is sent, which call, and what
// each answer means. This package takes the snapshot it sends
// (takeUpload) and makes every change of the entry the answers call for,
// through uploadLedger (uploadledger.go).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/objmeta"
	"github.com/bucketfs/bucketfs/cache/internal/send"
	"github.com/bucketfs/bucketfs/cache/internal/upload"
	"github.com/bucketfs/bucketfs/cache/internal/write"
	"github.com/bucketfs/bucketfs/transfer"
)

// upload sends the local copy of name to the bucket once and settles the
// outcome. e.Uploading is set by TakeDue (uploader.go) and cleared by the
// settling.
func (c *Cache) upload(ctx context.Context, name string) {
	u, ok := c.takeUpload(name)
	if !ok {
		return
	}
	c.uploadFlow().Run(ctx, u)
}

// uploadFlow is the conversation of c's uploads with the bucket, which
// changes the entries through uploadLedger.
func (c *Cache) uploadFlow() *upload.Flow[*entry] {
	return &upload.Flow[*entry]{
		Ledger:    uploadLedger{c},
		Bucket:    c.b,
		Sender:    c.sender,
		Folders:   c.folders,
		DataDir:   c.dataDir,
		ChunkSize: c.opts.ChunkSize,
		TooBig:    write.ObjectTooBig,
		Log:       c.log,
		AfterSend: func(name string) {
			if testAfterSend != nil {
				testAfterSend(name)
			}
		},
	}
}

// uploadJob is what one upload sends: its entry's state when it started,
// taken under the lock (upload.Job).
type uploadJob = upload.Job[*entry]

// takeUpload takes the snapshot an upload of name sends. It reports false
// (and settles the running flag) if there is nothing to send now.
func (c *Cache) takeUpload(name string) (uploadJob, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[name]
	if e == nil || !e.Rec.Dirty || e.Dropped || !isClosed(e.Ready) || e.Rec.ID == 0 {
		if e != nil {
			e.Uploading = false
			if e.Rec.Dirty && !e.Dropped {
				c.scheduleLocked(name, 10*time.Millisecond) // still being made (a rename): soon
			}
		}
		c.notifyLocked()
		return uploadJob{}, false
	}
	if c.mustWaitLocked(e, name) {
		// TakeDue took it, then the upload waited for a slot, and the
		// entry changed meanwhile: a directory rename made it a
		// deletion whose version a pending copy reads, say. Sent now,
		// it would destroy that copy's source. Back to the queue.
		e.Uploading = false
		c.scheduleLocked(name, 0) // wakes the waiters too
		return uploadJob{}, false
	}
	u := uploadJob{Entry: e, Name: name, Version: e.Version, Inflight: e.Inflight}
	u.Base, u.Size, u.ID = e.Rec.Generation, e.Rec.Size, e.Rec.ID
	u.Deleted, u.MetaOnly, u.Meta = e.Rec.Deleted, e.Rec.MetaOnly, e.Rec.Meta
	u.Src = send.Source{From: e.Rec.CopyFrom, Gen: e.Rec.CopyGen}
	u.ContentType, u.Encoding = e.Rec.CopyType, e.Rec.Encoding
	u.Ref = sumsRef{Chunk: e.Rec.ChunkSize, Sums: slices.Clone(e.Rec.Sums), Written: slices.Clone(e.Rec.Written)}
	e.Forced, e.RemoteMoved = false, false
	e.UploadSeq++
	u.Seq = e.UploadSeq
	return u, true
}

// testAfterSend, set by tests only, runs once the bucket answered an
// upload of content, after the flow found the entry in place
// (upload.Flow.AfterSend).
var testAfterSend func(name string)

// uploadDone settles an upload of u's content that ended with err (nil:
// the bucket has it as attrs).
func (c *Cache) uploadDone(ctx context.Context, u uploadJob, body fileSums, attrs transfer.ObjectAttrs, err error) {
	e, name, src, size := u.Entry, u.Name, u.Src, u.Size
	c.mu.Lock()
	if c.supersededLocked(e, name, u.Base, attrs, err) {
		// Renamed over since the upload ended (the flow's check, made
		// then, came too early): the successor is based on this upload
		// now, and the nodes that follow it learn so from this second
		// confirmation (Rebased).
		c.mu.Unlock()
		if err == nil {
			c.confirm(name, attrs, false)
		}
		return
	}
	e.Uploading = false
	if err != nil {
		// A file changed while it was sent is sent again (not a failure);
		// a refusal the bucket keeps giving holds the file (refusal.go).
		resent := c.resendChangedLocked(ctx, u, err)
		held := !resent && ctx.Err() == nil && c.invalidLocked(e, u, err)
		if !resent && !held {
			c.failedLocked(ctx, e, err)
		}
		c.notifyLocked()
		if !held {
			c.mu.Unlock()
			return
		}
		rec, seq := e.Snapshot()
		c.mu.Unlock()
		c.holdRefused(e, rec, seq)
		return
	}
	e.Retries = 0
	e.UploadedHere = true
	e.Rec.Generation = attrs.Generation
	e.Rec.Attempts = nil // confirmed: the bucket's version is known
	e.UploadedSeq = u.Seq
	c.stats.Uploads++
	// Still the copy this upload made (a change since would have made
	// the content local): the bucket has the content now.
	wasCopy := src.From != "" && e.Rec.CopyFrom == src.From
	e.Rec.CopyFrom, e.Rec.CopyGen, e.Rec.CopyType = "", 0, ""
	var victims []*entry
	if c.settleLocked(e, name, u.Version, u.Inflight, true) {
		e.Rec.Meta = objmeta.Own(attrs.Metadata) // what the bucket has now (its time among it)
		if src.From == "" {
			c.adoptSumsLocked(e, body, attrs)
		}
		if e.Rec.Size != size && src.From == "" {
			// Nothing changed since the upload read the file: its size is
			// the truth (a size counted late, as after passthrough writes
			// through a handle a rename moved, would be stale).
			c.resizeLocked(e, size)
		}
		if wasCopy && !e.Rec.Complete && e.Refs == 0 {
			victims = c.dropLocked(e) // a copy made, none of it cached: nothing to keep
			c.madeCopies.Remember(name, attrs.Generation, time.Now())
		}
	} else if wasCopy {
		e.Rec.MetaOnly = true // only attributes changed since: patch them (sent as queued again)
	}
	if len(victims) > 0 {
		c.notifyLocked()
		c.mu.Unlock()
		c.removeAll(victims)
		return
	}
	c.chargeSizeLocked(e) // a cached version like any other now
	rec, recSeq := e.Snapshot()
	// Changed files the kernel wrote may have passed the cap (space.go):
	// clean now, copies can go until the cache is under it again.
	over, _ := c.makeRoomLocked(0)
	c.mu.Unlock()
	if err := c.persistEntry(e, rec, recSeq); err != nil {
		// Not a loss: the index still says dirty, so the next start sends
		// the file again (as a conflict copy, since the bucket moved on).
		c.log.Warn("recording an upload in the cache index failed; the next start uploads the file again", "object", name, "err", err)
	}
	c.removeAll(over)
	c.mu.Lock()
	c.notifyLocked()
	c.mu.Unlock()
}

// settleLocked is the one ending of a transfer of e's changes (an upload
// of content, a deletion, a conflict copy, a metadata patch: uploadDone,
// deleteDone, conflictDone, patchDone) that reached the bucket, or
// that there is no point in sending again. version and inflight are
// e.Version and e.Inflight as the transfer took its snapshot; also is
// the caller's own condition for e to be clean. If no change began or
// ended since and also holds, e is clean now: its dirty flag, dirtying
// and DirtySince are cleared, and settleLocked returns true (the caller
// then records what the bucket has). Otherwise name is queued again at
// once, to send what e is now, and it returns false: a change made
// during a transfer is sent again, never dropped.
func (c *Cache) settleLocked(e *entry, name string, version uint64, inflight int, also bool) bool {
	e.RefusedAt, e.RefusedWhy, e.Invalids = time.Time{}, "", 0 // the bucket took it
	if e.Version != version || inflight != 0 || e.Inflight != 0 || !also {
		c.scheduleLocked(name, 0)
		return false
	}
	e.Clean()
	return true
}

// deleteDone settles u, a deletion of u.Name based on generation
// u.Base, that the flow carried out (upload.Flow's deleteRemote) with
// err; gone says the versions it is about are not in the bucket.
func (c *Cache) deleteDone(ctx context.Context, u uploadJob, err error, gone bool) {
	e, name, base, version, inflight := u.Entry, u.Name, u.Base, u.Version, u.Inflight
	c.mu.Lock()
	if e.Dropped {
		// A file was renamed over the deleted name meanwhile: it replaces
		// whatever this deletion was about. If that is gone now, the
		// successor is a new object.
		e.Uploading = false
		if next := c.entries[name]; err == nil && gone && next != nil && next != e && next.Rec.Generation == base {
			next.Rec.Generation = 0
		}
		c.notifyLocked()
		c.mu.Unlock()
		return
	}
	e.Uploading = false
	if err != nil {
		c.failedLocked(ctx, e, err)
		c.notifyLocked()
		c.mu.Unlock()
		return
	}
	var victims []*entry
	if c.settleLocked(e, name, version, inflight, true) {
		e.Rec.Generation = 0 // the object is gone
		e.Rec.Attempts = nil
		if e.Writers == 0 {
			victims = c.dropLocked(e)
		}
	} else if gone && e.Rec.Generation == base {
		// Written again meanwhile: the new state is sent (queued again),
		// as a new object since the old one is gone now.
		e.Rec.Generation = 0
		e.Rec.Attempts = nil
	}
	c.notifyLocked()
	c.mu.Unlock()
	c.removeAll(victims)
}

// OnConfirmed sets the function told, after the fact and without locks
// held, what the bucket holds for a name once one of this cache's changes
// reached it: the object a, or (deleted) nothing. Set it before the first
// change; nil turns it off.
func (c *Cache) OnConfirmed(f func(name string, a transfer.ObjectAttrs, deleted bool)) {
	c.mu.Lock()
	c.confirmedFn = f
	c.mu.Unlock()
}

// confirm calls the OnConfirmed function, if any. No lock may be held.
func (c *Cache) confirm(name string, a transfer.ObjectAttrs, deleted bool) {
	c.mu.Lock()
	f := c.confirmedFn
	c.mu.Unlock()
	if f != nil {
		f(name, a, deleted)
	}
}

// AttemptKey is the custom metadata key (x-goog-meta-bucketfs-upload)
// that carries the ID of the upload that wrote an object version
// (objmeta.AttemptKey).
const AttemptKey = objmeta.AttemptKey

// maxAttempts bounds the unconfirmed upload IDs kept per record.
const maxAttempts = 8

// supersededLocked settles an upload of e whose entry was replaced while
// the upload ran (a file renamed over it): the application replaced that
// content, so a failure needs no retry and a refusal no conflict copy.
// If the upload succeeded (as a), the bucket now holds it: the successor,
// based on the generation the upload replaced, is now based on the new
// one. It reports whether e was superseded. c.mu is held; the caller
// confirms a after unlocking (uploadLedger.Superseded is it for the
// flow).
func (c *Cache) supersededLocked(e *entry, name string, base int64, a transfer.ObjectAttrs, err error) bool {
	if !e.Dropped {
		return false
	}
	e.Uploading = false
	if next := c.entries[name]; err == nil && next != nil && next != e && next.Rec.Generation == base {
		next.Rec.Generation, next.RebasedFrom, next.RebasedTo = a.Generation, base, a.Generation
	}
	c.notifyLocked()
	return true
}

// recordAttempt adds upload ID id to e's unconfirmed tries (once) and,
// for a conflict copy (copyAs not empty), names the object it is sent
// as (record.SavingAs); then it writes the record to the journal. It
// returns upload.ErrSuperseded if e was replaced meanwhile, or is being
// replaced (set aside by a rename: restoreLocked queues it again if the
// rename fails).
func (c *Cache) recordAttempt(e *entry, id, copyAs string) error {
	c.mu.Lock()
	if e.Dropped || e.Aside {
		c.mu.Unlock()
		return upload.ErrSuperseded
	}
	if !slices.Contains(e.Rec.Attempts, id) {
		e.Rec.Attempts = append(e.Rec.Attempts, id)
	}
	if n := len(e.Rec.Attempts); n > maxAttempts {
		e.Rec.Attempts = append([]string(nil), e.Rec.Attempts[n-maxAttempts:]...)
	}
	if copyAs != "" {
		e.Rec.SavingAs = copyAs
	}
	rec, seq := e.Snapshot()
	c.mu.Unlock()
	if err := c.persistEntry(e, rec, seq); err != nil {
		return fmt.Errorf("recording an upload of %s in the cache index: %w", e.Name, err)
	}
	return nil
}

// failedLocked schedules the next try of a failed upload.
func (c *Cache) failedLocked(ctx context.Context, e *entry, err error) {
	if ctx.Err() != nil {
		return // shutting down: the file stays dirty for the next start
	}
	if c.offlineLocked(e, err) {
		return // offline.go: sent when the bucket is back
	}
	e.Retries++
	c.stats.UploadFailures++
	op := "upload"
	if e.Rec.Deleted {
		op = "delete"
	}
	c.noteErrorLocked(op, e.Name, err)
	delay := upload.Backoff(e.Retries)
	if fixableRefusal(err) { // refusal.go
		delay = upload.PermanentRetry
		c.refusedLocked(e, err)
		c.log.Error("the bucket refused an upload; the file stays dirty in the cache and is tried again later", "object", e.Name, "retry_in", delay, "err", err)
	} else {
		c.log.Warn("upload failed; retrying", "object", e.Name, "attempt", e.Retries, "retry_in", delay, "err", err)
	}
	c.scheduleLocked(e.Name, delay)
}

// resendChangedLocked settles an upload of u that the bucket refused
// because the bytes it received do not have the checksum read from the
// file just before (transfer.ErrChecksum): the file changed while it was
// sent. That is a race with the application, not a failure: it is not
// counted or reported as one, and the name is queued again, at once if
// the cache saw a write since u's snapshot (else after the usual backoff,
// so that a file that reads differently every time is not sent in a
// tight loop). It reports whether err was such a refusal.
func (c *Cache) resendChangedLocked(ctx context.Context, u uploadJob, err error) bool {
	if ctx.Err() != nil || !errors.Is(err, transfer.ErrChecksum) {
		return false
	}
	e := u.Entry
	var delay time.Duration
	if e.Version == u.Version && e.Inflight == 0 {
		e.Retries++
		delay = upload.Backoff(e.Retries)
	}
	c.log.Info("changed while uploading; sending again", "object", u.Name, "retry_in", delay)
	c.scheduleLocked(u.Name, delay)
	return true
}
