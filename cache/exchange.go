package cache

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
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
	if a.Name == b.Name {
		return a.Generation, b.Generation, nil
	}
	ha, err := c.openWriter(ctx, a, false, false)
	if err != nil {
		return 0, 0, err
	}
	defer ha.h.Close()
	hb, err := c.openWriter(ctx, b, false, false)
	if err != nil {
		return 0, 0, err
	}
	defer hb.h.Close()
	sizes := map[*writeLedger]int64{}
	for _, w := range []*writeLedger{ha, hb} {
		if err := w.h.File().Sync(); err != nil {
			return 0, 0, fmt.Errorf("syncing %s before exchanging it: %w", w.e.name, err)
		}
		// The file says how big it is (writes through passthrough
		// handles still open count only when they close).
		st, err := w.h.File().Stat()
		if err != nil {
			return 0, 0, fmt.Errorf("exchanging %s: %w", w.e.name, err)
		}
		sizes[w] = st.Size()
	}
	ea, eb := ha.e, hb.e
	idA, idB := c.j.NewID(), c.j.NewID() // the new records of a.Name and b.Name

	c.mu.Lock()
	err = c.waitLocked(ctx, func() bool { return !c.frozen.Covers(a.Name) && !c.frozen.Covers(b.Name) })
	if err == nil && (c.entries[a.Name] != ea || c.entries[b.Name] != eb || ea.rec.Deleted || eb.rec.Deleted) {
		err = fmt.Errorf("exchanging %s and %s: %w", a.Name, b.Name, ErrBusy)
	}
	if err != nil {
		c.mu.Unlock()
		return 0, 0, err
	}
	now := time.Now()
	// Each name's new record: the other's content, based on the bucket
	// version this name's content had (and its uploads not yet
	// confirmed: the bucket may hold one of them).
	// Not ready: nothing uses them before the journal has them.
	made := func(name string, id uint64, base, content *entry, size int64) *entry {
		return c.publishLocked(name, record{ID: id, Generation: base.rec.Generation, Size: size, ChunkSize: c.opts.ChunkSize,
			Complete: true, Dirty: true, Attempts: base.rec.Attempts, Meta: content.rec.Meta}, now)
	}
	na := made(a.Name, idA, ea, eb, sizes[hb])
	nb := made(b.Name, idB, eb, ea, sizes[ha])
	baseA, baseB = na.rec.Generation, nb.rec.Generation
	c.mu.Unlock()

	err = os.Link(c.dataPath(eb.rec.ID), c.dataPath(idA))
	if err == nil {
		if err = os.Link(c.dataPath(ea.rec.ID), c.dataPath(idB)); err != nil {
			os.Remove(c.dataPath(idA))
		}
	}
	if err == nil {
		c.j.MadeFile()
		// Both records in one journal entry: after a crash, both or
		// neither.
		if err = c.j.Append(durable.PutOp(a.Name, na.rec, 0), durable.PutOp(b.Name, nb.rec, 0)); err != nil {
			os.Remove(c.dataPath(idA))
			os.Remove(c.dataPath(idB))
		}
	}

	c.mu.Lock()
	var victims []*entry
	if err != nil {
		// Nothing happened: the old entries take their names back.
		for _, p := range [][2]*entry{{na, ea}, {nb, eb}} {
			ne, old := p[0], p[1]
			victims = append(victims, c.unpublishLocked(ne, err)...)
			c.chargeLocked(ne, 0)
			c.entries[old.name] = old
		}
		c.mu.Unlock()
		c.removeAll(victims)
		return 0, 0, fmt.Errorf("exchanging %s and %s in the cache index: %w", a.Name, b.Name, err)
	}
	for _, p := range [][2]*entry{{ea, nb}, {eb, na}} {
		old, ne := p[0], p[1] // old's file is ne's now
		close(ne.ready)
		c.moveHandlesLocked(old, ne, map[*entry]*writeLedger{ea: ha, eb: hb}[old])
		c.releaseHoldLocked(old)
		// Its bytes live on under the other name: its own record goes
		// when the last handle does (the journal names its ID no more).
		old.rec.Dirty = false
		victims = append(victims, c.dropLocked(old)...) // none: the exchange's handles hold it
		c.chargeLocked(old, 0)
		old.version++
		ne.recSeq++ // what the journal entry wrote
		c.scheduleLocked(ne.name, c.opts.WriteBackDelay)
	}
	c.notifyLocked()
	c.mu.Unlock()
	c.removeAll(victims)
	return baseA, baseB, nil
}
