package cache

// The downloads that fill the entries' copies: made, walked, taken and
// retired (package internal/fetch has the rules and the flows; here, the
// entry's side: its hold on a pending copy's source, its record and its
// references).

import (
	"errors"
	"os"

	"github.com/bucketfs/bucketfs/cache/internal/fetch"
	"github.com/bucketfs/bucketfs/transfer"
)

// downloadLocked returns e's download, made now if it has none
// (fetch.Fetcher.Make) and then, if whole, its walk started at once for
// why.
func (c *Cache) downloadLocked(e *entry, why transfer.FetchReason, whole bool) (*transfer.Download, error) {
	if dl := e.Fill.Download(); dl != nil {
		return dl, nil
	}
	if err := c.fetcher.Make(&e.Fill, c.dataPath(e.Rec.ID), e.Name, &e.Rec, &e.Checked); err != nil {
		return nil, err
	}
	if e.Rec.PendingCopy() {
		// The download reads that version: it is held while it runs,
		// even if the copy is made meanwhile.
		e.DlHold, _ = e.Fill.Source()
		c.holds.Add(e.DlHold)
	}
	if whole {
		c.fetcher.Walk(&e.Fill, why, fillLedger{c, e}, e.Name)
	}
	return e.Fill.Download(), nil
}

// promote starts the background walk of dl, e's download, for why,
// unless it was retired meanwhile or its walk started already
// (fetch.Fetcher.Walk).
func (c *Cache) promote(e *entry, dl *transfer.Download, why transfer.FetchReason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.Fill.Download() == dl {
		c.fetcher.Walk(&e.Fill, why, fillLedger{c, e}, e.Name)
	}
}

// takeDownloadLocked detaches e's download for retire. The chunks it
// fetched are recorded in memory at once, so that an Open before retire
// has synced them sees them present (and a complete copy as complete)
// instead of downloading them again; the index records them only after
// the sync.
func (c *Cache) takeDownloadLocked(e *entry) (*transfer.Download, *os.File) {
	dl, f := e.Fill.Take()
	c.releaseDownloadHoldLocked(e)
	if dl != nil && !e.Rec.LocalContent() {
		fetch.Absorb(&e.Rec, &e.Checked, dl)
	}
	return dl, f
}

// retire stops dl, e's download taken, syncs its file and records which
// chunks it holds (fetch.Fetcher.Retire).
func (c *Cache) retire(e *entry, dl *transfer.Download, f *os.File) {
	c.fetcher.Retire(fillLedger{c, e}, e.Name, dl, f)
}

// fillLedger is e's side of the end of its download (fetch.Ledger).
type fillLedger struct {
	c *Cache
	e *entry
}

func (l fillLedger) Ended(dl *transfer.Download) *os.File {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	if !l.e.Fill.Ended(dl, l.e.Refs == 0) {
		return nil
	}
	_, f := l.c.takeDownloadLocked(l.e)
	return f
}

func (l fillLedger) Failed(err error) {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	l.c.noteErrorLocked("download", l.e.Name, err)
	if errors.Is(err, transfer.ErrChecksum) {
		l.c.stats.ChecksumMismatches++ // nothing of it counts as present: fetched again at the next open
	}
}

func (l fillLedger) Unsynced(dl *transfer.Download) error {
	c, e := l.c, l.e
	c.mu.Lock()
	if e.Dropped || e.Rec.LocalContent() {
		c.mu.Unlock()
		return nil
	}
	e.Rec.Present, e.Rec.Complete, e.Checked = nil, false, nil
	rec, seq := e.Snapshot() // a record written since the take named the chunks
	c.mu.Unlock()
	return c.persistEntry(e, rec, seq)
}

func (l fillLedger) Retired(dl *transfer.Download) error {
	c, e := l.c, l.e
	c.mu.Lock()
	if e.Dropped {
		c.mu.Unlock()
		return nil
	}
	if !e.Rec.LocalContent() { // a changed copy is complete, whatever its old chunks were
		fetch.Absorb(&e.Rec, &e.Checked, dl)
	}
	rec, seq := e.Snapshot()
	c.mu.Unlock()
	return c.persistEntry(e, rec, seq)
}
