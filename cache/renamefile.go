package cache

// Renaming one file (Cache.Rename); renaming a directory is in rename.go.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/renameplan"
	"github.com/bucketfs/bucketfs/transfer"
)

// takeTargetLocked sets the entry of to, if any, aside for a rename whose
// source is to replace it (setAsideLocked): replaced once the journal has
// the rename, not lost if it refuses it. It returns the generation the
// rename's new record is based on (toBase, or the entry's, if newer or
// changed here) and the entry's uploads not yet confirmed (the bucket may
// hold one of them).
func (c *Cache) takeTargetLocked(to string, toBase int64) (base int64, attempts []string, old *setAside) {
	e := c.entries[to]
	if e == nil {
		// A copy that left the index after the caller looked the name up
		// (madecopies.go).
		now := time.Now()
		return max(toBase, c.madeCopies.Get(to, now), c.ownGone.Get(to, now)), nil, nil
	}
	base = renameplan.Base(toBase, &e.rec)
	return base, e.rec.Attempts, c.setAsideLocked(e, base)
}

// readyLocked reports whether name's entry, if any, is ready: not being
// made by a create or a rename whose journal entry is on its way.
func (c *Cache) readyLocked(name string) bool {
	e := c.entries[name]
	return e == nil || isClosed(e.ready)
}

// waitTargetLocked waits, with c.mu held (released while waiting), until
// no folder rename moves name and its entry, if any, is ready: renames
// onto one name take effect one after the other, so that a target set
// aside is never another rename's entry still on its way.
func (c *Cache) waitTargetLocked(ctx context.Context, name string) error {
	for {
		if err := c.waitThawedLocked(ctx, name); err != nil {
			return err
		}
		e := c.entries[name]
		if e == nil || isClosed(e.ready) {
			return nil
		}
		ready := e.ready
		c.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			c.mu.Lock()
			return ctx.Err()
		}
		c.mu.Lock()
	}
}

// Rename gives the content of version from (its local changes included)
// the name to, replacing what to held (toBase: the generation of to the
// application replaced, 0 if none). It is one atomic index change: after
// it, to is a changed file and from a deletion, each sent to the bucket
// in order with its name's other changes. A copy that is not complete
// locally is fetched first, unless it is a pending copy nothing uses
// (renamePendingCopy): that one moves as it is. Handles open on from for writing follow the
// file to its new name; handles open on to are orphaned (see WriteHandle).
//
// It returns the generation of to that the new record is based on: toBase,
// or a newer one this cache knows of (to's record changed or uploaded
// since the caller learnt toBase). The version the bucket will get from
// the rename replaces that one, so a file node that follows the content
// to its new name must hold it, not toBase (OnConfirmed's function tells
// this cache's upload of the content by that base).
func (c *Cache) Rename(ctx context.Context, from transfer.ObjectAttrs, to string, toBase int64) (int64, error) {
	if from.Name == to {
		return toBase, nil
	}
	if base, done, err := c.renamePendingCopy(from, to, toBase); done {
		return base, err
	}
	src, err := c.openWriter(ctx, from, false, false)
	if err != nil {
		return 0, err
	}
	defer src.h.Close()
	e := src.e
	if err := src.h.File().Sync(); err != nil {
		return 0, fmt.Errorf("syncing %s before renaming it: %w", from.Name, err)
	}
	// The file says how big it is: writes through passthrough handles
	// still open are counted only when they close.
	st, err := src.h.File().Stat()
	if err != nil {
		return 0, fmt.Errorf("renaming %s: %w", from.Name, err)
	}

	newID := c.j.NewID() // before the entry is visible: an upload must never see ID 0
	c.mu.Lock()
	if err := c.waitTargetLocked(ctx, to); err != nil {
		c.mu.Unlock()
		return 0, err
	}
	toBase, attempts, target := c.takeTargetLocked(to, toBase)
	meta := e.rec.Meta    // set by OpenWrite above from the object's, if it had none
	since := e.dirtySince // the content's changes wait as long as they did
	if !e.rec.Dirty {
		since = time.Now()
	}
	ne := c.publishLocked(to, record{ID: newID, Generation: toBase, Size: st.Size(), ChunkSize: c.opts.ChunkSize,
		Complete: true, Dirty: true, Attempts: attempts, Meta: meta}, since)
	c.mu.Unlock()

	// The new name shares the bytes: a hard link, no copy. Both records
	// change in one transaction.
	c.mu.Lock()
	nrec, tomb := ne.rec, renameplan.Tomb(e.rec)
	c.mu.Unlock()
	// No earlier state of the old name's record may reach the journal
	// after the entry below (an upload ending now would put one back, and
	// a crash would then undo the deletion): nothing else writes it until
	// it is marked.
	e.persistMu.Lock()
	err = os.Link(c.dataPath(tomb.ID), c.dataPath(nrec.ID))
	if err == nil {
		c.j.MadeFile()
		// Both records in one journal entry: after a crash, both or
		// neither.
		err = c.j.Append(durable.PutOp(to, nrec, 0), durable.PutOp(from.Name, tomb, 0))
		if err != nil {
			os.Remove(c.dataPath(nrec.ID))
		} else if derr := c.detachData(tomb.ID, from.Name, tomb); derr != nil {
			// The next start detaches it (load does so for every deletion).
			c.log.Warn("giving a renamed file's old name a file of its own failed", "object", from.Name, "err", derr)
		}
	}
	c.mu.Lock()
	ne.rec.ID = nrec.ID
	if err != nil {
		victims := c.unpublishLocked(ne, err)
		c.restoreLocked(target)
		c.mu.Unlock()
		e.persistMu.Unlock()
		c.releaseAside(target)
		c.removeAll(victims)
		return 0, fmt.Errorf("renaming %s to %s in the cache index: %w", from.Name, to, err)
	}
	close(ne.ready)
	c.replaceLocked(target, ne)
	e.rec.Deleted, e.rec.Dirty, e.rec.MetaOnly = true, true, false
	e.rec.Meta = nil // a file made again under the old name starts without it
	e.rec.CopyFrom, e.rec.CopyGen, e.rec.CopyType = "", 0, ""
	// The handles open on the file follow it to its new name (src, the
	// rename's own, closes with the old one).
	c.moveHandlesLocked(e, ne, src)
	c.moveChargeLocked(e, ne)
	ne.recSeq++ // the journal entry wrote both records
	// The new name is queued first: it is sent before the old one goes.
	// A copy of the old one, if pending, was completed by OpenWrite above.
	c.scheduleLocked(to, c.opts.WriteBackDelay)
	c.deletedLocked(e, time.Now())
	toBase = ne.rec.Generation // rebased if the target's own upload ended meanwhile (replaceLocked)
	c.mu.Unlock()
	c.settleDeletion(e, tomb)
	e.persistMu.Unlock()
	c.releaseAside(target)
	return toBase, nil
}

// renamePendingCopy is Rename for a file whose content is still a pending
// copy (its directory was renamed and the copy is not made yet) and that
// nothing uses: the new name takes the pending copy over (same source,
// same cached chunks), so nothing is downloaded; the old name becomes a
// deletion. done is false if the file is not such a copy (or its source
// is to itself): Rename then completes the local copy first. base is as
// Rename's.
func (c *Cache) renamePendingCopy(from transfer.ObjectAttrs, to string, toBase int64) (base int64, done bool, err error) {
	newID := c.j.NewID()
	c.mu.Lock()
	e := c.entries[from.Name]
	if e == nil || !isClosed(e.ready) || e.err != nil || e.dropped || !e.rec.PendingCopy() || e.rec.Deleted ||
		e.rec.CopyFrom == to || e.refs > 0 || e.writers > 0 || e.fill.Download() != nil || e.uploading || c.queue.InFlight(from.Name) ||
		c.frozen.Covers(from.Name) || c.frozen.Covers(to) || !c.readyLocked(to) {
		c.mu.Unlock()
		return 0, false, nil
	}
	// Until the journal has the rename, no transfer of the old name
	// starts (its copy would be made under the old name).
	e.uploading = true
	toBase, attempts, target := c.takeTargetLocked(to, toBase)
	nrec := e.rec
	nrec.ID, nrec.Generation, nrec.Attempts = newID, toBase, attempts
	nrec.Present = slices.Clone(e.rec.Present)
	since := e.dirtySince
	if since.IsZero() {
		since = time.Now()
	}
	ne := c.publishLocked(to, nrec, since) // holds the source before e lets go of it
	tomb := renameplan.Tomb(e.rec)
	c.mu.Unlock()

	// As in Rename: nothing else writes the old name's record until the
	// journal entry has both, and the new name shares the cached chunks.
	e.persistMu.Lock()
	err = os.Link(c.dataPath(e.rec.ID), c.dataPath(newID))
	if err == nil {
		c.j.MadeFile()
		if err = c.j.Append(durable.PutOp(to, nrec, 0), durable.PutOp(from.Name, tomb, 0)); err != nil {
			os.Remove(c.dataPath(newID))
		}
	}
	c.mu.Lock()
	e.uploading = false
	if err != nil {
		victims := c.unpublishLocked(ne, err)
		c.restoreLocked(target)
		c.notifyLocked()
		c.mu.Unlock()
		e.persistMu.Unlock()
		c.releaseAside(target)
		c.removeAll(victims)
		return 0, true, fmt.Errorf("renaming %s to %s in the cache index: %w", from.Name, to, err)
	}
	close(ne.ready)
	c.replaceLocked(target, ne)
	oldID := e.rec.ID
	e.rec = tomb
	c.chargeLocked(e, 0)
	ne.recSeq++                                 // the journal entry wrote both records
	c.scheduleLocked(to, c.opts.WriteBackDelay) // queued first, as in Rename
	c.deletedLocked(e, time.Now())              // the journal no longer says it is a copy
	c.notifyLocked()
	toBase = ne.rec.Generation // as in Rename
	c.mu.Unlock()
	c.settleDeletion(e, tomb)
	e.persistMu.Unlock()
	c.releaseAside(target)
	if derr := c.detachData(oldID, from.Name, tomb); derr != nil {
		c.log.Warn("giving a renamed file's old name a file of its own failed", "object", from.Name, "err", derr)
	}
	return toBase, true, nil
}
