package cache

// Renaming one file (Cache.Rename) and swapping two (exchange.go): the
// flow is package internal/filerename's, fileLedger and its Endings its
// steps in the cache; renaming a directory is in rename.go.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/filerename"
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
	base = renameplan.Base(toBase, &e.Rec)
	return base, e.Rec.Attempts, c.setAsideLocked(e, base)
}

// readyLocked reports whether name's entry, if any, is ready: not being
// made by a create or a rename whose journal entry is on its way.
func (c *Cache) readyLocked(name string) bool {
	e := c.entries[name]
	return e == nil || isClosed(e.Ready)
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
		if e == nil || isClosed(e.Ready) {
			return nil
		}
		ready := e.Ready
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
// (fileLedger.PendingCopy): that one moves as it is. Handles open on from for writing follow the
// file to its new name; handles open on to are orphaned (see WriteHandle).
//
// It returns the generation of to that the new record is based on: toBase,
// or a newer one this cache knows of (to's record changed or uploaded
// since the caller learnt toBase). The version the bucket will get from
// the rename replaces that one, so a file node that follows the content
// to its new name must hold it, not toBase (OnConfirmed's function tells
// this cache's upload of the content by that base).
func (c *Cache) Rename(ctx context.Context, from transfer.ObjectAttrs, to string, toBase int64) (int64, error) {
	return c.fileRenames().Rename(ctx, from, to, toBase)
}

// fileRenames is the flow of a file's rename and of an exchange.
func (c *Cache) fileRenames() filerename.Flow[*writeLedger] {
	return filerename.Flow[*writeLedger]{Ledger: fileLedger{c}, Journal: c.j, Path: c.dataPath, Detach: c.detachData, Log: c.log}
}

// fileLedger is the cache's side of a file's rename and of an exchange
// (filerename.Ledger; the contracts are on its methods there): each
// method is one critical section of Cache.mu, or waits as it says; the
// change it begins is a fileRename or an exchange (filerename.Ending).
type fileLedger struct{ c *Cache }

var _ filerename.Ledger[*writeLedger] = fileLedger{}

// Open opens a for writing (openWriter).
func (l fileLedger) Open(ctx context.Context, a transfer.ObjectAttrs) (*writeLedger, filerename.Writer, error) {
	w, err := l.c.openWriter(ctx, a, false, false)
	if err != nil {
		return nil, nil, err
	}
	return w, w.h, nil
}

// fileRename is one file's rename begun in the index: e, the old name's
// entry, becomes the deletion tomb once the journal has the rename; ne,
// the new name's, replaces target.
type fileRename struct {
	c       *Cache
	e, ne   *entry
	target  *setAside
	tomb    record
	src     *writeLedger // the rename's own handle: it closes with the old name
	pending bool         // a pending copy's (PendingCopy): e sends nothing meanwhile
}

// beginLocked returns r as begun, nrec the new name's record.
func (r *fileRename) beginLocked(nrec record) filerename.Begun {
	return filerename.Begun{Links: []filerename.Link{{From: r.tomb.ID, To: nrec.ID}},
		Ops:  []durable.Op{durable.PutOp(r.ne.Name, nrec, 0), durable.PutOp(r.e.Name, r.tomb, 0)},
		Tomb: &r.tomb, Ending: r}
}

// Rename publishes the new entry with the content w has open; e is read
// here, under the lock, since a directory's rename may have moved w.
func (l fileLedger) Rename(ctx context.Context, w *writeLedger, from, to string, toBase int64, id uint64, size int64) (filerename.Begun, error) {
	c := l.c
	c.mu.Lock()
	if err := c.waitTargetLocked(ctx, to); err != nil {
		c.mu.Unlock()
		return filerename.Begun{}, err
	}
	e := w.e
	if c.entries[from] != e || e.Rec.Deleted {
		c.mu.Unlock()
		return filerename.Begun{}, fmt.Errorf("renaming %s to %s: %w", from, to, ErrBusy)
	}
	toBase, attempts, target := c.takeTargetLocked(to, toBase)
	meta := e.Rec.Meta    // set by OpenWrite above from the object's, if it had none
	since := e.DirtySince // the content's changes wait as long as they did
	if !e.Rec.Dirty {
		since = time.Now()
	}
	ne := c.publishLocked(to, record{ID: id, Generation: toBase, Size: size, ChunkSize: c.opts.ChunkSize,
		Complete: true, Dirty: true, Attempts: attempts, Meta: meta}, since)
	r := &fileRename{c: c, e: e, ne: ne, target: target, tomb: renameplan.Tomb(e.Rec), src: w}
	b := r.beginLocked(ne.Rec)
	c.mu.Unlock()
	// No earlier state of the old name's record may reach the journal
	// after the rename's entry (an upload ending now would put one back,
	// and a crash would then undo the deletion): nothing else writes it
	// until it is marked.
	e.PersistMu.Lock()
	return b, nil
}

// PendingCopy publishes the new entry as a copy of the same source, with
// the same cached chunks.
func (l fileLedger) PendingCopy(from, to string, toBase int64, id uint64) (filerename.Begun, bool) {
	c := l.c
	c.mu.Lock()
	e := c.entries[from]
	if e == nil || !isClosed(e.Ready) || e.Err != nil || e.Dropped || !e.Rec.PendingCopy() || e.Rec.Deleted ||
		e.Rec.CopyFrom == to || e.Refs > 0 || e.Writers > 0 || e.Fill.Download() != nil || e.Uploading || c.queue.InFlight(from) ||
		c.frozen.Covers(from) || c.frozen.Covers(to) || !c.readyLocked(to) {
		c.mu.Unlock()
		return filerename.Begun{}, false
	}
	// Until the journal has the rename, no transfer of the old name
	// starts (its copy would be made under the old name).
	e.Uploading = true
	toBase, attempts, target := c.takeTargetLocked(to, toBase)
	nrec := e.Rec
	nrec.ID, nrec.Generation, nrec.Attempts = id, toBase, attempts
	nrec.Present = slices.Clone(e.Rec.Present)
	since := e.DirtySince
	if since.IsZero() {
		since = time.Now()
	}
	ne := c.publishLocked(to, nrec, since) // holds the source before e lets go of it
	r := &fileRename{c: c, e: e, ne: ne, target: target, tomb: renameplan.Tomb(e.Rec), pending: true}
	b := r.beginLocked(nrec)
	c.mu.Unlock()
	e.PersistMu.Lock() // as in Rename
	return b, true
}

// Undo unpublishes the new entry and puts the target back.
func (r *fileRename) Undo(err error) {
	c, e := r.c, r.e
	c.mu.Lock()
	if r.pending {
		e.Uploading = false
	}
	victims := c.unpublishLocked(r.ne, err)
	c.restoreLocked(r.target)
	if r.pending {
		c.notifyLocked()
	}
	c.mu.Unlock()
	e.PersistMu.Unlock()
	c.releaseAside(r.target)
	c.removeAll(victims)
}

// Apply gives the target's name to the new entry and makes e the
// deletion the journal wrote.
func (r *fileRename) Apply() []int64 {
	c, e, ne := r.c, r.e, r.ne
	c.mu.Lock()
	if r.pending {
		e.Uploading = false
	}
	close(ne.Ready)
	c.replaceLocked(r.target, ne)
	if r.pending {
		e.Rec = r.tomb
		c.chargeLocked(e, 0)
	} else {
		e.Rec.Deleted, e.Rec.Dirty, e.Rec.MetaOnly = true, true, false
		e.Rec.Meta = nil // a file made again under the old name starts without it
		e.Rec.CopyFrom, e.Rec.CopyGen, e.Rec.CopyType = "", 0, ""
		// The handles open on the file follow it to its new name (src, the
		// rename's own, closes with the old one).
		c.moveHandlesLocked(e, ne, r.src)
		c.moveChargeLocked(e, ne)
	}
	ne.RecSeq++ // the journal entry wrote both records
	// The new name is queued first: it is sent before the old one goes.
	// A copy of the old one, if pending, was completed by its open
	// (fileLedger.Open), or the new one took it over (PendingCopy).
	c.scheduleLocked(ne.Name, c.opts.WriteBackDelay)
	c.deletedLocked(e, time.Now()) // for a pending copy: the journal no longer says it is a copy
	if r.pending {
		c.notifyLocked()
	}
	base := ne.Rec.Generation // rebased if the target's own upload ended meanwhile (replaceLocked)
	c.mu.Unlock()
	c.settleDeletion(e, r.tomb)
	e.PersistMu.Unlock()
	c.releaseAside(r.target)
	return []int64{base}
}
