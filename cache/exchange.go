package cache

import (
	"context"
	"fmt"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/filerename"
	"github.com/bucketfs/bucketfs/transfer"
)

// Exchange swaps the contents of versions a and b (their local changes
// included) between their names, as rename(2) with RENAME_EXCHANGE does:
// afterwards a.Name holds what b held, with its metadata, and b.Name what
// a held. It is one atomic change of the index (one journal entry with
// both new records); the bucket follows, each name uploaded with its new
// content, based on the version it replaces. Copies that are not
// complete locally are fetched first. Handles open for writing follow
// their file to its new name.
//
// The old entries leave the index: each new record has an ID of its own
// and shares the old one's bytes (a hard link), so a write of an old
// record that was on its way (an upload ending) no longer applies to
// the name (persistEntry writes only over the record of its own ID).
//
// It returns the generations the new records of a.Name and b.Name are
// based on: each name's record's at the swap, which may be newer than
// a's or b's (an upload confirmed since the caller looked). A file node
// that follows its content to the other name must hold that one (see
// Rename).
func (c *Cache) Exchange(ctx context.Context, a, b transfer.ObjectAttrs) (baseA, baseB int64, err error) {
	return c.fileRenames().Exchange(ctx, a, b)
}

// exchange is an exchange begun in the index: na and nb, the new entries
// of a's and b's names, hold b's and a's content; ea and eb, the old
// ones, are out of the index, held by the exchange's handles (wa, wb).
type exchange struct {
	c              *Cache
	ea, eb, na, nb *entry
	wa, wb         *writeLedger
	bases          []int64
}

// Exchange publishes each name's new record; the handles' entries are
// read here, under the lock.
func (l fileLedger) Exchange(ctx context.Context, wa, wb *writeLedger, a, b string, idA, idB uint64, sizeA, sizeB int64) (filerename.Begun, error) {
	c := l.c
	c.mu.Lock()
	err := c.waitLocked(ctx, func() bool { return !c.frozen.Covers(a) && !c.frozen.Covers(b) })
	ea, eb := wa.e, wb.e
	if err == nil && (c.entries[a] != ea || c.entries[b] != eb || ea.Rec.Deleted || eb.Rec.Deleted) {
		err = fmt.Errorf("exchanging %s and %s: %w", a, b, ErrBusy)
	}
	if err != nil {
		c.mu.Unlock()
		return filerename.Begun{}, err
	}
	now := time.Now()
	// Each name's new record: the other's content, based on the bucket
	// version this name's content had (and its uploads not yet
	// confirmed: the bucket may hold one of them).
	// Not ready: nothing uses them before the journal has them.
	made := func(name string, id uint64, base, content *entry, size int64) *entry {
		return c.publishLocked(name, record{ID: id, Generation: base.Rec.Generation, Size: size, ChunkSize: c.opts.ChunkSize,
			Complete: true, Dirty: true, Attempts: base.Rec.Attempts, Meta: content.Rec.Meta}, now)
	}
	na := made(a, idA, ea, eb, sizeB)
	nb := made(b, idB, eb, ea, sizeA)
	x := &exchange{c: c, ea: ea, eb: eb, na: na, nb: nb, wa: wa, wb: wb, bases: []int64{na.Rec.Generation, nb.Rec.Generation}}
	begun := filerename.Begun{Links: []filerename.Link{{From: eb.Rec.ID, To: idA}, {From: ea.Rec.ID, To: idB}},
		Ops: []durable.Op{durable.PutOp(a, na.Rec, 0), durable.PutOp(b, nb.Rec, 0)}, Ending: x}
	c.mu.Unlock()
	return begun, nil
}

// Undo: nothing happened, the old entries take their names back.
func (x *exchange) Undo(err error) {
	c := x.c
	c.mu.Lock()
	var victims []*entry
	for _, p := range [][2]*entry{{x.na, x.ea}, {x.nb, x.eb}} {
		ne, old := p[0], p[1]
		victims = append(victims, c.unpublishLocked(ne, err)...)
		c.chargeLocked(ne, 0)
		c.entries[old.Name] = old
	}
	c.mu.Unlock()
	c.removeAll(victims)
}

// Apply lets the new entries be used; the old ones leave.
func (x *exchange) Apply() []int64 {
	c := x.c
	c.mu.Lock()
	var victims []*entry
	for _, p := range [][2]*entry{{x.ea, x.nb}, {x.eb, x.na}} {
		old, ne := p[0], p[1] // old's file is ne's now
		close(ne.Ready)
		c.moveHandlesLocked(old, ne, map[*entry]*writeLedger{x.ea: x.wa, x.eb: x.wb}[old])
		c.releaseHoldLocked(old)
		// Its bytes live on under the other name: its own record goes
		// when the last handle does (the journal names its ID no more).
		old.Rec.Dirty = false
		victims = append(victims, c.dropLocked(old)...) // none: the exchange's handles hold it
		c.chargeLocked(old, 0)
		old.Version++
		ne.RecSeq++ // what the journal entry wrote
		c.scheduleLocked(ne.Name, c.opts.WriteBackDelay)
	}
	c.notifyLocked()
	c.mu.Unlock()
	c.removeAll(victims)
	return x.bases
}
