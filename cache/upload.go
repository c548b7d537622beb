package cache

// One upload and its settling: a change of a name (content, deletion,
// conflict copy) sent to the bucket, and the entry updated for the
// outcome. The metadata-only patch is in meta.go.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/objmeta"
	"github.com/bucketfs/bucketfs/cache/internal/send"
	"github.com/bucketfs/bucketfs/transfer"
)

const (
	retryMax       = time.Minute     // longest wait between two tries of a failing upload
	permanentRetry = 5 * time.Minute // wait after the bucket refused an upload
	offlineRetry   = time.Second     // an upload cut by an outage: due again when the bucket is back (the uploader waits for it)
)

// upload sends the local copy of name to the bucket once and settles the
// outcome. e.uploading is set by takeDue and cleared here.
func (c *Cache) upload(ctx context.Context, name string) {
	u, ok := c.takeUpload(name)
	if !ok {
		return
	}
	e := u.e
	if u.deleted {
		c.deleteRemote(ctx, e, name, u.base, u.version, u.inflight)
		return
	}
	if u.metaOnly {
		c.patchMeta(ctx, e, name, u.base, u.meta, u.version, u.inflight)
		return
	}
	c.uploadContent(ctx, u)
}

// uploadJob is what one upload sends: its entry's state when it started,
// taken under the lock.
type uploadJob struct {
	e                     *entry
	name                  string
	version               uint64 // e.version then
	inflight              int    // e.inflight then
	base, size            int64
	id                    uint64
	deleted, metaOnly     bool
	meta                  map[string]string
	src                   send.Source
	contentType, encoding string
	ref                   sumsRef
	seq                   uint64 // e.uploadSeq of this upload
}

// takeUpload takes the snapshot an upload of name sends. It reports false
// (and settles the running flag) if there is nothing to send now.
func (c *Cache) takeUpload(name string) (uploadJob, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[name]
	if e == nil || !e.rec.Dirty || e.dropped || !isClosed(e.ready) || e.rec.ID == 0 {
		if e != nil {
			e.uploading = false
			if e.rec.Dirty && !e.dropped {
				c.scheduleLocked(name, 10*time.Millisecond) // still being made (a rename): soon
			}
		}
		c.notifyLocked()
		return uploadJob{}, false
	}
	if c.mustWaitLocked(e, name) {
		// takeDue took it, then the upload waited for a slot, and the
		// entry changed meanwhile: a directory rename made it a
		// deletion whose version a pending copy reads, say. Sent now,
		// it would destroy that copy's source. Back to the queue.
		e.uploading = false
		c.scheduleLocked(name, 0) // wakes the waiters too
		return uploadJob{}, false
	}
	u := uploadJob{e: e, name: name, version: e.version, inflight: e.inflight}
	u.base, u.size, u.id = e.rec.Generation, e.rec.Size, e.rec.ID
	u.deleted, u.metaOnly, u.meta = e.rec.Deleted, e.rec.MetaOnly, e.rec.Meta
	u.src = send.Source{From: e.rec.CopyFrom, Gen: e.rec.CopyGen}
	u.contentType, u.encoding = e.rec.CopyType, e.rec.Encoding
	u.ref = sumsRef{Chunk: e.rec.ChunkSize, Sums: slices.Clone(e.rec.Sums), Written: slices.Clone(e.rec.Written)}
	e.forced, e.remoteMoved = false, false
	e.uploadSeq++
	u.seq = e.uploadSeq
	return u, true
}

// testAfterSend, set by tests only, runs in uploadContent once the
// bucket answered, after supersededDuring found the entry in place.
var testAfterSend func(name string)

// uploadContent sends u's content (the cache file, or a server-side copy
// of its pending source) and settles the outcome.
func (c *Cache) uploadContent(ctx context.Context, u uploadJob) {
	e, name, base, src := u.e, u.name, u.base, u.src
	// The file says how big the copy is (writes through passthrough
	// handles are not counted anywhere else until those handles close),
	// and when it was last changed.
	var mtime time.Time
	if src.From != "" {
		// A copy: its time is in meta already, its size the source's.
	} else if st, err := os.Stat(c.dataPath(u.id)); err == nil {
		u.size, mtime = st.Size(), st.ModTime()
	}
	if u.size > MaxObjectSize {
		// Written by the kernel (passthrough), nothing held it to the
		// largest object: the bucket would refuse it, after the bytes.
		// It stays, dirty, until a person truncates or deletes it.
		c.mu.Lock()
		e.uploading = false
		c.failedLocked(ctx, e, objectTooBig(name, u.size))
		c.notifyLocked()
		c.mu.Unlock()
		return
	}
	var body fileSums
	if src.From == "" {
		var held bool
		body, held = c.scanForUpload(ctx, e, name, u.id, u.size, u.ref)
		if held {
			c.mu.Lock()
			e.uploading = false
			c.notifyLocked()
			c.mu.Unlock()
			return
		}
	}
	// An earlier try of this content may be in the bucket already,
	// unconfirmed: then nothing, or nothing twice, is sent.
	var adopted bool
	if base, adopted = c.earlierUpload(ctx, u, body, mtime); adopted {
		return
	}
	u.base = base
	attempt, err := c.noteAttempt(e)
	if err != nil {
		c.mu.Lock()
		e.uploading = false
		if !errors.Is(err, errSuperseded) {
			c.failedLocked(ctx, e, err)
		}
		c.notifyLocked()
		c.mu.Unlock()
		return
	}
	// A base below 0 is a deletion of "whatever was there" (a removed
	// directory's placeholder) written again: a new object.
	attrs, err := c.sender.Send(ctx, name, u.id, u.size, src, body.Put(transfer.PutOptions{IfGenerationMatch: max(base, 0), ContentType: u.contentType, ContentEncoding: u.encoding, Metadata: objmeta.ForUpload(u.meta, mtime, attempt)}))
	if c.supersededDuring(e, name, base, attrs, err) {
		return
	}
	if testAfterSend != nil {
		testAfterSend(name)
	}
	if src.From != "" && errors.Is(err, transfer.ErrNotExist) {
		c.copySourceGone(ctx, e, name, src)
		return
	}
	if errors.Is(err, transfer.ErrPrecondition) && strings.HasSuffix(name, "/") {
		// A directory's placeholder: every version is the same empty
		// object, so there is nothing to keep beside it.
		if a, serr := c.b.Stat(ctx, name); serr == nil {
			attrs, err = a, nil
		}
	}
	if errors.Is(err, transfer.ErrPrecondition) {
		if err = c.refused(ctx, u, body, mtime); err == nil {
			return
		}
	}
	if err == nil {
		// Before the change leaves the local overlay, so that listings
		// never miss the name.
		c.confirm(name, attrs, false)
	}
	c.uploadDone(ctx, u, body, attrs, err)
}

// refused handles an upload of u the bucket refused because its version
// is not the one u is based on. It returns nil once that is settled:
// the upload is queued again (the bucket's version is an unconfirmed
// upload of ours), or the local version was saved beside the bucket's.
func (c *Cache) refused(ctx context.Context, u uploadJob, body fileSums, mtime time.Time) error {
	e, name, base := u.e, u.name, u.base
	live, serr := c.b.Stat(ctx, name)
	if errors.Is(serr, transfer.ErrNotExist) && base > 0 {
		// Deleted in the bucket since the version the change is based
		// on: the change wins over the deletion (the application that
		// wrote it finds it at its name). It goes again as a new object
		// (ifGenerationMatch=0): a version written meanwhile refuses it,
		// and then both are kept.
		c.log.Warn("the object was deleted in the bucket while it had local changes: the deletion is overridden, the local version is uploaded at its name", "object", name, "based_on", base)
		c.mu.Lock()
		e.uploading = false
		if e.rec.Generation == base {
			e.rec.Generation = 0
		}
		c.scheduleLocked(name, 0)
		c.notifyLocked()
		c.mu.Unlock()
		return nil
	}
	gen, ours := c.ownVersionOf(e, live, serr)
	if ours && c.sameUpload(u, body, mtime, live) {
		// What this upload sends is there already: sending it again
		// would only make a new generation of the same bytes.
		c.adoptUpload(ctx, u, body, live)
		return nil
	}
	if ours {
		// The bucket holds an upload of ours whose answer a crash
		// (or a lost response) kept from us: not a conflict. Send
		// the copy again, based on it.
		c.log.Info("the bucket holds an earlier upload of this file that was not confirmed; uploading again on top of it", "object", name, "generation", gen)
		c.mu.Lock()
		e.uploading = false
		if e.rec.Generation == base {
			e.rec.Generation = gen
		}
		c.scheduleLocked(name, 0)
		c.notifyLocked()
		c.mu.Unlock()
		return nil
	}
	c.log.Info("upload refused: the bucket's version is not the one the local change is based on", "object", name, "based_on", base, "bucket_generation", gen)
	err := c.saveConflict(ctx, u, body, mtime)
	if err == nil {
		c.mu.Lock()
		e.uploadedSeq = u.seq // what was written is in the bucket, beside
		c.notifyLocked()
		c.mu.Unlock()
	}
	return err
}

// uploadDone settles an upload of u's content that ended with err (nil:
// the bucket has it as attrs).
func (c *Cache) uploadDone(ctx context.Context, u uploadJob, body fileSums, attrs transfer.ObjectAttrs, err error) {
	e, name, src, size := u.e, u.name, u.src, u.size
	c.mu.Lock()
	if c.supersededLocked(e, name, u.base, attrs, err) {
		// Renamed over since the upload ended (supersededDuring, checked
		// then, came too early): the successor is based on this upload
		// now, and the nodes that follow it learn so from this second
		// confirmation (Rebased).
		c.mu.Unlock()
		if err == nil {
			c.confirm(name, attrs, false)
		}
		return
	}
	e.uploading = false
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
		rec, seq := c.snapshotLocked(e)
		c.mu.Unlock()
		c.holdRefused(e, rec, seq)
		return
	}
	e.retries = 0
	e.uploadedHere = true
	e.rec.Generation = attrs.Generation
	e.rec.Attempts = nil // confirmed: the bucket's version is known
	e.uploadedSeq = u.seq
	c.stats.Uploads++
	// Still the copy this upload made (a change since would have made
	// the content local): the bucket has the content now.
	wasCopy := src.From != "" && e.rec.CopyFrom == src.From
	e.rec.CopyFrom, e.rec.CopyGen, e.rec.CopyType = "", 0, ""
	var victims []*entry
	if c.settleLocked(e, name, u.version, u.inflight, true) {
		e.rec.Meta = objmeta.Own(attrs.Metadata) // what the bucket has now (its time among it)
		if src.From == "" {
			c.adoptSumsLocked(e, body, attrs)
		}
		if e.rec.Size != size && src.From == "" {
			// Nothing changed since the upload read the file: its size is
			// the truth (a size counted late, as after passthrough writes
			// through a handle a rename moved, would be stale).
			c.resizeLocked(e, size)
		}
		if wasCopy && !e.rec.Complete && e.refs == 0 {
			victims = c.dropLocked(e) // a copy made, none of it cached: nothing to keep
			c.madeCopies.Remember(name, attrs.Generation, time.Now())
		}
	} else if wasCopy {
		e.rec.MetaOnly = true // only attributes changed since: patch them (sent as queued again)
	}
	if len(victims) > 0 {
		c.notifyLocked()
		c.mu.Unlock()
		c.removeAll(victims)
		return
	}
	c.chargeSizeLocked(e) // a cached version like any other now
	rec, recSeq := c.snapshotLocked(e)
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

// settleLocked is the one ending of a transfer of e's changes (upload,
// deleteRemote, saveConflict, patchMeta) that reached the bucket, or
// that there is no point in sending again. version and inflight are
// e.version and e.inflight as the transfer took its snapshot; also is
// the caller's own condition for e to be clean. If no change began or
// ended since and also holds, e is clean now: its dirty flag, dirtying
// and dirtySince are cleared, and settleLocked returns true (the caller
// then records what the bucket has). Otherwise name is queued again at
// once, to send what e is now, and it returns false: a change made
// during a transfer is sent again, never dropped.
func (c *Cache) settleLocked(e *entry, name string, version uint64, inflight int, also bool) bool {
	e.refusedAt, e.refusedWhy, e.invalids = time.Time{}, "", 0 // the bucket took it
	if e.version != version || inflight != 0 || e.inflight != 0 || !also {
		c.scheduleLocked(name, 0)
		return false
	}
	e.rec.Dirty, e.dirtying, e.dirtySince = false, nil, time.Time{}
	return true
}

// deleteRemote carries out a recorded deletion of name, based on
// generation base.
func (c *Cache) deleteRemote(ctx context.Context, e *entry, name string, base int64, version uint64, inflight int) {
	c.mu.Lock()
	unconfirmed := len(e.rec.Attempts) > 0
	c.mu.Unlock()
	var err error
	switch {
	case base == 0 && !unconfirmed:
		// Never uploaded: nothing in the bucket to delete.
	case base < 0:
		err = c.b.Delete(ctx, name, 0)
	case base > 0:
		err = c.b.Delete(ctx, name, base)
	}
	if (base == 0 && unconfirmed) || (unconfirmed && errors.Is(err, transfer.ErrPrecondition)) {
		// An upload whose answer never came may have put a version of
		// ours there: delete it if so.
		err = nil
		if gen, ours := c.ownVersion(ctx, e, name); ours {
			err = c.b.Delete(ctx, name, gen)
		}
	}
	gone := true // the versions this deletion is about are not in the bucket
	switch {
	case errors.Is(err, transfer.ErrNotExist):
		err = nil // gone already
	case errors.Is(err, transfer.ErrPrecondition):
		// Someone wrote a newer version after the one deleted here: it is
		// not ours to delete.
		c.log.Warn("not deleted from the bucket: the object changed there since the version deleted here", "object", name, "err", err)
		err, gone = nil, false
	}
	if err == nil && gone {
		c.mu.Lock()
		c.madeCopies.Forget(name) // no version to base a replacement on now
		c.mu.Unlock()
		c.confirm(name, transfer.ObjectAttrs{}, true) // before the deletion leaves the overlay
		if strings.HasSuffix(name, "/") {
			// While the deletion is still recorded: a flush waits for
			// it, and after a crash the next start does it again.
			c.folders.Prune(ctx, name)
		}
	}
	c.mu.Lock()
	if e.dropped {
		// A file was renamed over the deleted name meanwhile: it replaces
		// whatever this deletion was about. If that is gone now, the
		// successor is a new object.
		e.uploading = false
		if next := c.entries[name]; err == nil && gone && next != nil && next != e && next.rec.Generation == base {
			next.rec.Generation = 0
		}
		c.notifyLocked()
		c.mu.Unlock()
		return
	}
	e.uploading = false
	if err != nil {
		c.failedLocked(ctx, e, err)
		c.notifyLocked()
		c.mu.Unlock()
		return
	}
	var victims []*entry
	if c.settleLocked(e, name, version, inflight, true) {
		e.rec.Generation = 0 // the object is gone
		e.rec.Attempts = nil
		if e.writers == 0 {
			victims = c.dropLocked(e)
		}
	} else if gone && e.rec.Generation == base {
		// Written again meanwhile: the new state is sent (queued again),
		// as a new object since the old one is gone now.
		e.rec.Generation = 0
		e.rec.Attempts = nil
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

// errSuperseded: the entry was replaced (renamed over) before its upload
// was sent; the upload is not needed.
var errSuperseded = errors.New("superseded by a newer local version")

// supersededDuring settles an upload of e whose entry was replaced while
// the upload ran (a file renamed over it): the application replaced that
// content, so a failure needs no retry and a refusal no conflict copy.
// If the upload succeeded, the bucket now holds it: the successor, based
// on the generation the upload replaced, is now based on the new one.
// It reports whether e was superseded.
func (c *Cache) supersededDuring(e *entry, name string, base int64, a transfer.ObjectAttrs, err error) bool {
	c.mu.Lock()
	superseded := c.supersededLocked(e, name, base, a, err)
	c.mu.Unlock()
	if superseded && err == nil {
		c.confirm(name, a, false)
	}
	return superseded
}

// supersededLocked is supersededDuring with c.mu held, without the
// confirmation (the caller makes it after unlocking).
func (c *Cache) supersededLocked(e *entry, name string, base int64, a transfer.ObjectAttrs, err error) bool {
	if !e.dropped {
		return false
	}
	e.uploading = false
	if next := c.entries[name]; err == nil && next != nil && next != e && next.rec.Generation == base {
		next.rec.Generation, next.rebasedFrom, next.rebasedTo = a.Generation, base, a.Generation
	}
	c.notifyLocked()
	return true
}

// noteAttempt records, in the journal, the ID of an upload of e's
// content at its name about to be sent, before it is sent.
func (c *Cache) noteAttempt(e *entry) (string, error) {
	id := objmeta.NewAttemptID()
	return id, c.recordAttempt(e, id, "")
}

// recordAttempt adds upload ID id to e's unconfirmed tries (once) and,
// for a conflict copy (copyAs not empty), names the object it is sent
// as (record.SavingAs); then it writes the record to the journal. It
// returns errSuperseded if e was replaced meanwhile.
func (c *Cache) recordAttempt(e *entry, id, copyAs string) error {
	c.mu.Lock()
	if e.dropped {
		c.mu.Unlock()
		return errSuperseded
	}
	if !slices.Contains(e.rec.Attempts, id) {
		e.rec.Attempts = append(e.rec.Attempts, id)
	}
	if n := len(e.rec.Attempts); n > maxAttempts {
		e.rec.Attempts = append([]string(nil), e.rec.Attempts[n-maxAttempts:]...)
	}
	if copyAs != "" {
		e.rec.SavingAs = copyAs
	}
	rec, seq := c.snapshotLocked(e)
	c.mu.Unlock()
	if err := c.persistEntry(e, rec, seq); err != nil {
		return fmt.Errorf("recording an upload of %s in the cache index: %w", e.name, err)
	}
	return nil
}

// ownVersion reports whether the live version of name in the bucket was
// written by one of e's unconfirmed uploads, and its generation.
func (c *Cache) ownVersion(ctx context.Context, e *entry, name string) (int64, bool) {
	a, err := c.b.Stat(ctx, name)
	return c.ownVersionOf(e, a, err)
}

// ownVersionOf is ownVersion of a, what a Stat of the name answered
// (with err).
func (c *Cache) ownVersionOf(e *entry, a transfer.ObjectAttrs, err error) (int64, bool) {
	if err != nil {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return a.Generation, objmeta.WrittenBy(a.Metadata, e.rec.Attempts)
}

// failedLocked schedules the next try of a failed upload.
func (c *Cache) failedLocked(ctx context.Context, e *entry, err error) {
	if ctx.Err() != nil {
		return // shutting down: the file stays dirty for the next start
	}
	if c.offlineLocked(e, err) {
		return // offline.go: sent when the bucket is back
	}
	e.retries++
	c.stats.UploadFailures++
	op := "upload"
	if e.rec.Deleted {
		op = "delete"
	}
	c.noteErrorLocked(op, e.name, err)
	delay := min(time.Second<<min(e.retries-1, 6), retryMax)
	if fixableRefusal(err) { // refusal.go
		delay = permanentRetry
		c.refusedLocked(e, err)
		c.log.Error("the bucket refused an upload; the file stays dirty in the cache and is tried again later", "object", e.name, "retry_in", delay, "err", err)
	} else {
		c.log.Warn("upload failed; retrying", "object", e.name, "attempt", e.retries, "retry_in", delay, "err", err)
	}
	c.scheduleLocked(e.name, delay)
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
	e := u.e
	var delay time.Duration
	if e.version == u.version && e.inflight == 0 {
		e.retries++
		delay = min(time.Second<<min(e.retries-1, 6), retryMax)
	}
	c.log.Info("changed while uploading; sending again", "object", u.name, "retry_in", delay)
	c.scheduleLocked(u.name, delay)
	return true
}
