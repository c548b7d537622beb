package cache

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/objmeta"
	"github.com/bucketfs/bucketfs/transfer"
)

// Custom metadata. A local version carries the object's custom metadata
// (record.Meta) to the bucket with its content, so that an upload keeps
// what other tools set and what the file system above set (modes,
// owners, a symlink's target). The cache gives meaning to one key only:
// the modification time, which it takes from the cache file at upload.
//
// A change of metadata alone (chmod, utimes of a file whose content has
// no local changes) is a record that is Dirty with MetaOnly set: it is
// sent as a metadata patch conditional on the generation, never as a new
// upload of the content; if the object changed in the bucket meanwhile,
// the bucket's version wins and the change is dropped, with a warning.

// MtimeKey is the custom metadata key (x-goog-meta-gcsfuse_mtime) of a
// file's modification time (objmeta.MtimeKey).
const MtimeKey = objmeta.MtimeKey

// FormatMtime is t as a MtimeKey value.
func FormatMtime(t time.Time) string { return objmeta.FormatMtime(t) }

// ParseMtime reads a MtimeKey value.
func ParseMtime(s string) (time.Time, bool) { return objmeta.ParseMtime(s) }

// ObjectMtime is the modification time of object version a: MtimeKey if
// it has it, else when it was written.
func ObjectMtime(a transfer.ObjectAttrs) time.Time { return objmeta.Mtime(a) }

// SetMeta sets the custom metadata keys of md on the local version of a,
// an object version whose metadata in the bucket is a.Metadata (keys are
// set, never removed: a patch keeps the keys it does not name). With
// MtimeKey in md, the cache file's
// modification time is set too. The change goes to the bucket with the
// next upload of the content, or alone, as a metadata patch, if the
// content has no local changes. When SetMeta returns, the change
// survives a crash of the process.
func (c *Cache) SetMeta(ctx context.Context, a transfer.ObjectAttrs, md map[string]string) error {
	e, err := c.acquire(ctx, a, false)
	if err != nil {
		return err
	}
	if e == nil {
		return fmt.Errorf("%s: %w (%d bytes, cache max size %d)", a.Name, ErrNoSpace, a.Size, c.opts.MaxSize)
	}
	defer c.release(e)
	// The change takes effect in memory, is journaled, and only then is
	// sent; if the journal refuses it (a full disk), it is undone: a
	// failed chmod leaves no trace. Holding PersistMu orders the entry
	// before any later snapshot of the record.
	e.PersistMu.Lock()
	c.mu.Lock()
	if e.Rec.Deleted {
		c.mu.Unlock()
		e.PersistMu.Unlock()
		return fmt.Errorf("%s: %w", a.Name, transfer.ErrNotExist)
	}
	prevMeta, prevDirty, prevMetaOnly, prevSince := e.Rec.Meta, e.Rec.Dirty, e.Rec.MetaOnly, e.DirtySince
	e.Rec.Meta = objmeta.Set(e.Rec.Meta, e.Rec.Dirty, a.Metadata, md)
	if !e.Rec.Dirty {
		e.Rec.Dirty, e.Rec.MetaOnly = true, true
		e.Dirtied(time.Now())
		// Indexed before c.mu is let go: the journal write below ends
		// (PersistMu released) before c.mu is taken again, and a dirty
		// entry must never be outside the index with neither held. An
		// undo leaves the name there; LocalNames drops clean names.
		c.markLocalLocked(e.Name)
	}
	e.Version++
	changed := e.Version
	id := e.Rec.ID
	rec, seq := e.Snapshot()
	c.mu.Unlock()
	err = c.j.Append(durable.PutOp(e.Name, rec, rec.ID))
	if err == nil {
		e.PersistedSeq = seq
	}
	e.PersistMu.Unlock()
	c.mu.Lock()
	if err != nil {
		c.undoSetMetaLocked(e, changed, seq, prevMeta, prevDirty, prevMetaOnly, prevSince)
		return fmt.Errorf("recording a metadata change of %s: %w", a.Name, err)
	}
	if rec.CopyFrom == "" {
		c.releaseHoldLocked(e) // as persistEntry does: the journal no longer says copy
	}
	if !prevDirty && e.Dirtying == nil {
		e.Dirtying = make(chan struct{})
		close(e.Dirtying)
	}
	if e.Writers == 0 {
		c.scheduleLocked(e.Name, c.opts.WriteBackDelay)
	}
	c.mu.Unlock()
	if t, ok := ParseMtime(md[MtimeKey]); ok && !c.keepMark(e, c.dataPath(id)) {
		if err := os.Chtimes(c.dataPath(id), t, t); err != nil {
			return fmt.Errorf("setting the modification time of %s's cache file: %w", a.Name, err)
		}
	}
	return nil
}

// patchDone settles u, a metadata-only change of u.Name (see SetMeta)
// that the flow sent as a patch (upload.Flow's patchMeta), with err; lost:
// not applied, the bucket's version stays.
func (c *Cache) patchDone(ctx context.Context, u uploadJob, err error, lost bool) {
	e, name, version, inflight := u.Entry, u.Name, u.Version, u.Inflight
	c.mu.Lock()
	e.Uploading = false
	if err != nil {
		c.failedLocked(ctx, e, err)
		c.notifyLocked()
		c.mu.Unlock()
		return
	}
	e.Retries = 0
	var victims []*entry
	switch {
	case !c.settleLocked(e, name, version, inflight, e.Rec.MetaOnly):
		// Changed meanwhile: the new state is sent (queued again).
	case lost:
		e.Rec.MetaOnly = false
		if e.Writers == 0 {
			victims = c.dropLocked(e) // the bucket's version is another one
		}
	default:
		e.Rec.MetaOnly = false
		e.UploadedHere = true
	}
	rec, seq := e.Snapshot()
	c.notifyLocked()
	c.mu.Unlock()
	if len(victims) == 0 {
		if err := c.persistEntry(e, rec, seq); err != nil {
			c.log.Warn("recording a metadata change as sent failed; the next start sends it again", "object", name, "err", err)
		}
	}
	c.removeAll(victims)
}

// undoSetMetaLocked takes back a metadata change the journal refused (a
// failed chmod leaves no trace), unless another change of e came since
// (version), which then owns the record. Called with c.mu held; returns
// with it released. A snapshot taken since the change (a download
// recording its chunks, say) holds the change too and may be written
// after the refusal: the undone record is then written again, so that
// the journal does not keep a change the caller was told failed.
func (c *Cache) undoSetMetaLocked(e *entry, changed, seq uint64, meta map[string]string, dirty, metaOnly bool, since time.Time) {
	if e.Version != changed {
		c.mu.Unlock()
		return
	}
	e.Rec.Meta, e.Rec.Dirty, e.Rec.MetaOnly, e.DirtySince = meta, dirty, metaOnly, since
	if e.RecSeq == seq { // nothing snapshotted the change since
		c.mu.Unlock()
		return
	}
	rec, rseq := e.Snapshot()
	c.mu.Unlock()
	if err := c.persistEntry(e, rec, rseq); err != nil {
		c.log.Warn("recording the undo of a failed metadata change failed; the next start may apply the change", "object", e.Name, "err", err)
	}
}
