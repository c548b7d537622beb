package cache

// The write handle: opening a file for writing, its changes (begin, end)
// and how a rename or deletion moves or orphans its handles.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/fetch"
	"github.com/bucketfs/bucketfs/cache/internal/objmeta"
	"github.com/bucketfs/bucketfs/cache/internal/write"
	"github.com/bucketfs/bucketfs/transfer"
)

// WriteHandle reads and writes the local copy of one object (package
// internal/write). Its methods are safe for concurrent use; Close must be
// called exactly once.
type WriteHandle = write.Handle

// writeLedger is a WriteHandle's side in the cache: the handle's state
// that Cache.mu guards, and what it asks of the entries (write.Cache). A
// rename moves it to the new name's entry, a deletion orphans it
// (moveHandlesLocked, orphanLocked).
type writeLedger struct {
	c         *Cache
	h         *WriteHandle // set before the ledger is shared
	untouched *untouched   // a hidden open of a clean copy: undone at Close if nothing was written (untouched.go)

	// Guarded by Cache.mu.
	e      *entry // the entry of the file's current name
	orphan bool   // the file was deleted while this handle was open
	busy   int    // changes in flight through this handle (counted in e.Inflight too)
}

// OpenWrite opens version a of an object for reading and writing; a with
// Generation 0 is an object that does not exist yet. The copy is completed
// first (downloaded fully), unless trunc is set and no download runs: then
// it starts empty. A copy with changes not yet uploaded is used whatever a
// says. A file that cannot fit in the cache fails with ErrNoSpace.
//
// With hidden set, the caller hands the descriptor to the kernel
// (passthrough), so writes bypass WriteAt: the copy counts as changed from
// the open until Close, which then takes its size from the file.
//
// The open takes a while (the copy may be fetched first), and the file
// may leave its name meanwhile: deleted, renamed, or renamed over. The
// handle then does not join it (it would write into the deletion, and
// bring the name back, or into an entry no longer indexed, and every
// write would fail): the open counts as made after that change. A new
// file (trunc, generation 0: a create) is opened again at the name as it
// is now; an existing one answers ErrStale, on which the caller looks
// the name up again.
func (c *Cache) OpenWrite(ctx context.Context, a transfer.ObjectAttrs, trunc, hidden bool) (*WriteHandle, error) {
	w, err := c.openWriter(ctx, a, trunc, hidden)
	if err != nil {
		return nil, err
	}
	return w.h, nil
}

// openWriter is OpenWrite, for the cache: the handle's ledger.
func (c *Cache) openWriter(ctx context.Context, a transfer.ObjectAttrs, trunc, hidden bool) (*writeLedger, error) {
	for attempt := 1; ; attempt++ {
		w, err := c.openWrite(ctx, a, trunc, hidden)
		if !errors.Is(err, ErrLeftName) {
			return w, err
		}
		if !(trunc && a.Generation == 0) || attempt == 3 {
			return nil, fmt.Errorf("%s: %w: %w", a.Name, ErrStale, ErrLeftName)
		}
	}
}

// ErrLeftName means the file an open for writing looked up left its
// name (deleted, renamed, or renamed over) before the open was made. It
// comes with ErrStale (errors.Is finds both).
var ErrLeftName = errors.New("the file was deleted or renamed while it was being opened for writing")

// testBeforeJoin, set by tests only, runs in openWrite between the
// acquire of the entry and the handle's joining it, with no lock held.
var testBeforeJoin func(name string)

// testAfterJoin, set by tests only, runs in openWrite once the handle
// joined its entry, before a hidden handle's change begins.
var testAfterJoin func(name string)

func (c *Cache) openWrite(ctx context.Context, a transfer.ObjectAttrs, trunc, hidden bool) (*writeLedger, error) {
	e, err := c.acquire(ctx, a, trunc && a.Generation == 0)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, fmt.Errorf("%s: %w (%d bytes, cache max size %d)", a.Name, ErrNoSpace, a.Size, c.opts.MaxSize)
	}
	c.mu.Lock()
	left := e.Left
	// A deleted name is opened again only by a create: the file an open
	// of an existing one looked up is gone.
	gone := e.Dropped || e.Rec.Deleted && !(trunc && a.Generation == 0)
	c.mu.Unlock()
	if gone {
		c.release(e)
		return nil, ErrLeftName
	}
	if err := c.verify.BeforeWrite(verifyLedger{c, e}, trunc); err != nil {
		c.release(e)
		return nil, err
	}
	if trunc, err = c.completeForWrite(ctx, e, a, trunc); err != nil {
		c.release(e)
		return nil, err
	}
	c.mu.Lock()
	f := e.Spare
	e.Spare = nil
	// Truncating a file nobody writes that is empty and not deleted
	// changes nothing.
	emptyAlready := e.Rec.Size == 0 && e.Writers == 0 && !e.Rec.Deleted
	// The cache file's modification time is the file's from now on (an
	// upload sends it): a copy of the bucket's version starts with that
	// version's.
	fromBucket := !e.Rec.LocalContent() && e.Writers == 0 && !e.Rec.Deleted
	mtimeOf := a
	if e.Rec.Meta != nil {
		mtimeOf.Metadata = e.Rec.Meta // with a time set here (MetaOnly), that one
	}
	path := c.dataPath(e.Rec.ID)
	c.mu.Unlock()
	if f == nil {
		f, err = os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			c.release(e)
			return nil, fmt.Errorf("opening cache file: %w", err)
		}
	}
	if mt := ObjectMtime(mtimeOf); fromBucket && !mt.IsZero() {
		if err := os.Chtimes(path, mt, mt); err != nil {
			c.log.Warn("setting a cache file's modification time failed", "object", a.Name, "err", err)
		}
	}
	if testBeforeJoin != nil {
		testBeforeJoin(a.Name)
	}
	w := &writeLedger{c: c, e: e}
	w.h = write.New(w, f, hidden)
	c.mu.Lock()
	if e.Left != left || e.Dropped {
		c.mu.Unlock()
		f.Close()
		c.release(e)
		return nil, ErrLeftName
	}
	e.Writers++
	if e.handles == nil {
		e.handles = map[*writeLedger]struct{}{}
	}
	e.handles[w] = struct{}{}
	c.writeHandles[w] = struct{}{}
	// Every byte is local now; a dirty copy must never be downloaded over.
	if dl := e.Fill.Download(); dl != nil && !e.Rec.LocalContent() {
		fetch.Absorb(&e.Rec, &e.Checked, dl) // the sums of what it fetched, before a change makes the file the truth
	}
	if hidden && !trunc {
		w.untouched = untouchedLocked(e)
	}
	e.Rec.Complete, e.Rec.Present = true, nil
	c.mu.Unlock()
	if testAfterJoin != nil {
		testAfterJoin(a.Name)
	}
	if hidden {
		var m *write.Mark
		if w.untouched != nil {
			m = &w.untouched.Mark
		}
		if err := w.h.BeginHidden(m); err != nil {
			return nil, err
		}
	}
	if trunc && !emptyAlready {
		if err := w.h.Truncate(0); err != nil {
			// The copy was declared complete for the truncation: unless the
			// change is recorded, it must not be served as the object.
			c.mu.Lock()
			if !e.Rec.LocalContent() {
				e.Rec.Complete = false
				if !e.Rec.Dirty {
					c.dropLocked(e) // removed when h releases it below
				}
			}
			c.mu.Unlock()
			w.h.Close()
			return nil, err
		}
	}
	return w, nil
}

// completeForWrite makes e's copy whole before a write handle opens on
// it: fetched fully, or, with trunc set and no download running, empty
// and complete at once. A deletion written again is truncated: it
// returns trunc, set then.
func (c *Cache) completeForWrite(ctx context.Context, e *entry, a transfer.ObjectAttrs, trunc bool) (bool, error) {
	c.mu.Lock()
	if e.Rec.Deleted {
		// Written again after a deletion not yet sent: a new, empty file
		// that replaces it (its first change clears Deleted).
		trunc = true
	} else if e.Rec.Meta == nil && !e.Rec.Dirty {
		e.Rec.Meta = objmeta.Own(a.Metadata) // an upload keeps what the object had
	}
	if trunc {
		// New content: whatever the old version's encoding, it is not
		// this one's.
		e.Rec.Encoding = ""
	}
	complete := e.Rec.Complete || e.Fill.Complete()
	var dl *transfer.Download
	switch {
	case complete:
	case trunc && e.Fill.Download() == nil:
		// Nothing is being written into the file: it can start empty. It
		// counts as complete from now on, so no download starts into it.
		complete = true
		e.Rec.Complete, e.Rec.Present = true, nil
	default:
		var err error
		if dl, err = c.downloadLocked(e, transfer.FetchWhole, true); err != nil {
			c.mu.Unlock()
			return trunc, err
		}
	}
	c.mu.Unlock()
	if dl != nil {
		// Every byte, fetched now if the background walk has not (or
		// gave up); when this returns no fetch writes into the file any more.
		if err := dl.EnsureComplete(ctx); err != nil {
			return trunc, fmt.Errorf("fetching %s before writing it: %w", a.Name, staleOr(err))
		}
	}
	return trunc, nil
}

// SyncName makes the local copy of name durable, its cache file and its
// record, for an fsync through a handle that does not write it (a
// read-only one) whose writer closed meanwhile (WriteHandle.Sync then
// fails with os.ErrClosed).
func (c *Cache) SyncName(name string) error {
	c.mu.Lock()
	e := c.entries[name]
	var path string
	if e != nil && !e.Dropped && e.Rec.ID != 0 {
		path = c.dataPath(e.Rec.ID)
	}
	c.mu.Unlock()
	if path != "" {
		if err := write.SyncFile(path); err != nil {
			return err
		}
	}
	return c.j.Sync()
}

// Sync makes every change recorded so far (names made, deleted, renamed;
// files changed) durable against power loss. The bytes of changed files
// are made durable by their own WriteHandle.Sync.
func (c *Cache) Sync() error { return c.j.Sync() }

// Close lets go of w's entry, once w's file is closed (write.Cache):
// the last writer to close queues the upload, after the write-back
// delay.
func (w *writeLedger) Close() {
	c := w.c
	c.mu.Lock()
	delete(c.writeHandles, w)
	e := w.e
	if !w.orphan {
		e.Writers--
		delete(e.handles, w)
		if e.Writers == 0 && e.Rec.Dirty {
			delay := c.writeBackDelayLocked()
			if e.RemoteMoved {
				delay = 0 // the conflict is settled now (announce.go)
			}
			c.scheduleLocked(e.Name, delay)
		}
	}
	c.mu.Unlock()
	c.release(e)
}

// CloseWriters closes every WriteHandle still open and returns how many
// there were. The mount calls it once the kernel can send nothing more:
// the kernel sends the release of a closed file asynchronously, and an
// unmount right after the close can drop it, which would leave the file
// "open for writing" and its upload waiting for a close that never comes.
func (c *Cache) CloseWriters() int {
	c.mu.Lock()
	hs := make([]*WriteHandle, 0, len(c.writeHandles))
	for w := range c.writeHandles {
		hs = append(hs, w.h)
	}
	c.mu.Unlock()
	for _, h := range hs {
		h.Close()
	}
	return len(hs)
}

// orphanLocked detaches every write handle open on e: e's file was
// deleted (or replaced by a rename). Their changes in flight stop
// counting as e's; they keep their own copy of the bytes.
func (c *Cache) orphanLocked(e *entry) {
	for h := range e.handles {
		h.orphan = true
		e.Inflight -= h.busy
		e.Writers--
		delete(e.handles, h)
	}
	e.Version++
	e.Left++
}

// moveHandlesLocked moves every write handle open on e, but skip, to ne:
// e's file now has ne's name (a rename). The handles' changes in flight
// and their references move along.
func (c *Cache) moveHandlesLocked(e, ne *entry, skip *writeLedger) {
	for h := range e.handles {
		if h == skip {
			continue
		}
		delete(e.handles, h)
		e.Writers--
		e.Inflight -= h.busy
		e.Refs--
		if ne.handles == nil {
			ne.handles = map[*writeLedger]struct{}{}
		}
		ne.handles[h] = struct{}{}
		ne.Writers++
		ne.Inflight += h.busy
		ne.Refs++
		h.e = ne
	}
	e.Version++
	e.Left++
	ne.Version++
}

// The handle's ledger (write.Cache): each method one critical section
// of Cache.mu, but Begin, Record and Untouched, which journal between
// theirs, and Grow (room.go) and CheckRead (checksum.go).

// Begin starts a change: the first change to a clean copy records it as
// dirty, durably, before any byte is written. It records, under the
// lock, which chunks the change touches (record.Written; all of them,
// their sums forgotten, for a nil span); if that changes the record, it
// is made durable before the change too. A change through an orphaned
// handle touches no entry.
func (w *writeLedger) Begin(span write.Span) error {
	c := w.c
	c.mu.Lock()
	if w.orphan {
		w.busy++
		c.mu.Unlock()
		return nil
	}
	e := w.e
	if e.Dropped {
		c.mu.Unlock()
		return fmt.Errorf("%s was replaced in the cache while open for writing; reopen it", e.Name)
	}
	if e.Rec.Damaged != "" {
		c.mu.Unlock()
		return fmt.Errorf("%s: %w: %s", e.Name, ErrDamaged, e.Rec.Damaged)
	}
	w.busy++
	e.Inflight++
	e.Version++
	e.Changes++
	// The first change of the content is recorded before it is made:
	// the first since the copy was clean, since a deletion (that it is
	// undone), or since a change of metadata alone (that the content is
	// local now).
	// A pending copy's content is complete here (OpenWrite fetched it):
	// from the first change on, the file is the truth, not the source.
	first := e.Dirtying == nil || e.Rec.Deleted || e.Rec.MetaOnly || e.Rec.CopyFrom != ""
	prevDirty, prevDeleted, prevMetaOnly := e.Rec.Dirty, e.Rec.Deleted, e.Rec.MetaOnly
	prevCopy, prevCopyGen, prevCopyType := e.Rec.CopyFrom, e.Rec.CopyGen, e.Rec.CopyType
	if first {
		e.Rec.CopyFrom, e.Rec.CopyGen, e.Rec.CopyType = "", 0, ""
		c.chargeSizeLocked(e) // a pending copy counted nothing; its bytes are here now
		e.Dirtying = make(chan struct{})
		e.Rec.Dirty = true
		c.markLocalLocked(e.Name)
		e.Dirtied(time.Now())
	}
	ch := e.Dirtying
	e.Rec.Deleted, e.Rec.MetaOnly = false, false
	var marked bool
	if span == nil {
		marked = e.Rec.ForgetSums()
	} else {
		marked = e.Rec.MarkWritten(span(e.Rec.Size))
	}
	var rec record
	var seq uint64
	if first || marked {
		rec, seq = e.Snapshot()
	}
	c.mu.Unlock()
	if marked && !first {
		// The chunks this change touches are recorded as written before
		// their bytes change (a later snapshot written first covers them).
		if err := c.persistEntry(e, rec, seq); err != nil {
			c.mu.Lock()
			w.unbeginLocked()
			c.mu.Unlock()
			return fmt.Errorf("recording a change of %s in the cache index: %w", e.Name, err)
		}
	}
	if first {
		err := c.persistEntry(e, rec, seq)
		c.mu.Lock()
		e.DirtyErr = err
		if err != nil {
			// Nothing was written: the copy is as it was, and the next
			// change tries to record itself again.
			e.Rec.Dirty, e.Rec.Deleted, e.Rec.MetaOnly = prevDirty, prevDeleted, prevMetaOnly
			e.Rec.CopyFrom, e.Rec.CopyGen, e.Rec.CopyType = prevCopy, prevCopyGen, prevCopyType
			e.Dirtying = nil
			e.DirtySince = time.Time{}
		}
		c.mu.Unlock()
		close(ch)
	}
	<-ch
	c.mu.Lock()
	var err error
	if e.Dirtying != ch {
		err = e.DirtyErr // the attempt this change waited for failed
	}
	if err != nil {
		w.unbeginLocked()
	}
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("recording a change of %s in the cache index: %w", e.Name, err)
	}
	return nil
}

// unbeginLocked takes back a change Begin counted and could not record,
// from the entry the handle has now.
func (w *writeLedger) unbeginLocked() {
	w.busy--
	if !w.orphan {
		w.e.Inflight--
	}
}

// End finishes a change begun by Begin; the file now reaches at least
// minSize bytes. The change ends in the entry the handle has now (a
// rename may have moved it meanwhile, its change along with it).
func (w *writeLedger) End(minSize int64) {
	c := w.c
	c.mu.Lock()
	if w.busy == 0 {
		c.mu.Unlock()
		return // a hidden handle whose begin failed
	}
	w.busy--
	if !w.orphan {
		e := w.e
		if minSize > e.Rec.Size {
			c.resizeLocked(e, minSize)
		}
		e.Version++
		e.Inflight--
		c.settleChargeLocked(e) // what a failed or short write reserved
	}
	c.mu.Unlock()
}

// Resize records size as the size of the file of w's entry.
func (w *writeLedger) Resize(size int64) {
	w.c.mu.Lock()
	if !w.orphan {
		w.c.resizeLocked(w.e, size)
	}
	w.c.mu.Unlock()
}

// Size is the size w's entry records, and whether w is orphaned.
func (w *writeLedger) Size() (int64, bool) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.e.Rec.Size, w.orphan
}

// Record makes the record of w's entry durable: journaled, and the
// journal synced; an orphan's file has no record.
func (w *writeLedger) Record() (orphan bool, err error) {
	c := w.c
	c.mu.Lock()
	if w.orphan {
		c.mu.Unlock()
		return true, nil // a deleted file: nothing of it is recorded
	}
	e := w.e
	rec, seq := e.Snapshot()
	c.mu.Unlock()
	if err := c.persistEntry(e, rec, seq); err != nil {
		return false, err
	}
	return false, c.j.Sync()
}

// CountRead counts n bytes read from a local copy (Stats.ReadBytes).
func (w *writeLedger) CountRead(n int64) { w.c.readBytes.Add(n) }

// MaxFileSize is the cache's (space.go).
func (w *writeLedger) MaxFileSize() int64 { return w.c.MaxFileSize() }

// Grow is makeRoomToGrow for w (room.go).
func (w *writeLedger) Grow(size int64) error { return w.c.makeRoomToGrow(w, size) }

// resizeLocked records a new size of e's copy and its cost in the budget.
func (c *Cache) resizeLocked(e *entry, size int64) {
	e.Rec.Size = size
	c.chargeSizeLocked(e)
	e.Rec.Complete, e.Rec.Present = true, nil
}
