package filerename

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/transfer"
)

// Ledger is the cache's side of a file's rename and of an exchange: each
// method is one critical section of the cache's lock, taken and released
// inside it, unless it says it waits. W is the cache's side of a handle
// open for writing, which the flow hands back and never looks into.
type Ledger[W any] interface {
	// Open opens version a for writing, as the cache's OpenWrite does:
	// its copy complete (fetched first, if it was not), joined to a's
	// entry. h is the handle, closed by the flow.
	Open(ctx context.Context, a transfer.ObjectAttrs) (w W, h Writer, err error)

	// PendingCopy begins the rename of from to to (toBase: the
	// generation of to the caller replaced), the new record's ID id, if
	// from's entry is a pending copy that nothing uses, reads, writes or
	// sends, ready, not deleted, not a copy of to, with neither name
	// under a folder rename and to's entry, if any, ready: the new name
	// takes the pending copy over (same source, same cached chunks), and
	// no transfer of from starts until the end. ok is false, with nothing
	// changed, if it is not such a copy. After ok, as Rename.
	PendingCopy(from, to string, toBase int64, id uint64) (b Begun, ok bool)

	// Rename begins the rename of the file w has open, from, to to
	// (toBase as PendingCopy's), the new record's ID id and its size
	// size: it waits (the lock released meanwhile) until no folder
	// rename moves to and to's entry, if any, is ready (renames onto one
	// name take effect in turn), then gives up (ErrBusy) if w's entry is
	// no longer from's, or a deletion; else it sets to's entry, if any,
	// aside, and publishes the new entry, not ready. Then, with the lock
	// released, it takes the persistMu of from's entry, held until Undo
	// or Apply: no earlier state of from's record may reach the journal
	// after the rename's entry.
	Rename(ctx context.Context, w W, from, to string, toBase int64, id uint64, size int64) (Begun, error)

	// Exchange begins the swap of the files wa and wb have open, a and b
	// (sizeA and sizeB: their contents' sizes): it waits (the lock
	// released meanwhile) until no folder rename moves either, then
	// gives up (ErrBusy) if either handle's entry is no longer its
	// name's, or a deletion; else it publishes each name's new record
	// (idA, idB), not ready: the other's content, based on the version
	// this name's had.
	Exchange(ctx context.Context, wa, wb W, a, b string, idA, idB uint64, sizeA, sizeB int64) (Begun, error)
}

// Writer is a handle open for writing (the cache's WriteHandle).
type Writer interface {
	File() *os.File
	Close() error
}

// Journal is the cache's journal (durable.Journal).
type Journal interface {
	NewID() uint64
	// LinkFile makes cache file to a hard link of cache file from, and
	// tells the journal it was made (a sync makes its name durable
	// before the records).
	LinkFile(from, to uint64) error
	Append(ops ...durable.Op) error
}

// Begun is a change begun in the index: what the flow makes of it, and
// the cache's end of it.
type Begun struct {
	Links  []Link          // the new cache files, hard links of old ones
	Ops    []durable.Op    // the journal entry: every record the change writes
	Tomb   *durable.Record // a rename's: the deletion its old name becomes
	Ending Ending          // held by the cache
}

// Link is a new cache file (To), a hard link of an old one (From).
type Link struct{ From, To uint64 }

// Ending is a change begun in the index, as the cache holds it; one of
// its methods is called, once, with no lock held.
type Ending interface {
	// Undo takes the change back (err: why it failed): the new entries
	// leave the index (their waiters get err), what they replaced
	// comes back, the persistMu the begin took is released.
	Undo(err error)

	// Apply, once the journal has the change, lets the new entries be
	// used, replaces what they set aside, turns a rename's old name into
	// the deletion written (its handles follow the file to the new name)
	// and releases the persistMu the begin took. bases are the
	// generations the new records are based on, in the order of Ops (a
	// rename's: rebased if the target's own upload ended meanwhile).
	Apply() (bases []int64)
}

// Flow renames files and exchanges them, changing the cache only through
// Ledger.
type Flow[W any] struct {
	Ledger  Ledger[W]
	Journal Journal
	Path    func(id uint64) string // a cache file's path
	// Detach gives the old name's deletion (rec, in cache file id) a
	// cache file of its own.
	Detach func(id uint64, name string, rec durable.Record) error
	Log    *slog.Logger
}

// Rename gives the content of version from (its local changes included)
// the name to, replacing what to held (toBase: the generation of to the
// caller replaced, 0 if none), and returns the generation the new
// record is based on (see Cache.Rename).
func (f Flow[W]) Rename(ctx context.Context, from transfer.ObjectAttrs, to string, toBase int64) (int64, error) {
	if from.Name == to {
		return toBase, nil
	}
	if base, done, err := f.pendingCopy(from.Name, to, toBase); done {
		return base, err
	}
	w, h, err := f.Ledger.Open(ctx, from)
	if err != nil {
		return 0, err
	}
	defer h.Close()
	if err := h.File().Sync(); err != nil {
		return 0, fmt.Errorf("syncing %s before renaming it: %w", from.Name, err)
	}
	// The file says how big it is: writes through passthrough handles
	// still open are counted only when they close.
	st, err := h.File().Stat()
	if err != nil {
		return 0, fmt.Errorf("renaming %s: %w", from.Name, err)
	}
	id := f.Journal.NewID() // before the entry is visible: an upload must never see ID 0
	b, err := f.Ledger.Rename(ctx, w, from.Name, to, toBase, id, st.Size())
	if err != nil {
		return 0, err
	}
	if err := f.commit(b); err != nil {
		b.Ending.Undo(err)
		return 0, fmt.Errorf("renaming %s to %s in the cache index: %w", from.Name, to, err)
	}
	f.detach(from.Name, b.Tomb)
	return b.Ending.Apply()[0], nil
}

// pendingCopy is Rename for a file whose content is still a pending copy
// (its directory was renamed and the copy is not made yet) and that
// nothing uses: the new name takes the pending copy over, so nothing is
// downloaded; the old name becomes a deletion. done is false if the file
// is not such a copy (or its source is to itself): Rename then completes
// the local copy first.
func (f Flow[W]) pendingCopy(from, to string, toBase int64) (base int64, done bool, err error) {
	b, ok := f.Ledger.PendingCopy(from, to, toBase, f.Journal.NewID())
	if !ok {
		return 0, false, nil
	}
	if err := f.commit(b); err != nil {
		b.Ending.Undo(err)
		return 0, true, fmt.Errorf("renaming %s to %s in the cache index: %w", from, to, err)
	}
	base = b.Ending.Apply()[0]
	f.detach(from, b.Tomb)
	return base, true, nil
}

// Exchange swaps the contents of versions a and b (their local changes
// included) between their names, and returns the generations the new
// records of a.Name and b.Name are based on (see Cache.Exchange).
func (f Flow[W]) Exchange(ctx context.Context, a, b transfer.ObjectAttrs) (baseA, baseB int64, err error) {
	if a.Name == b.Name {
		return a.Generation, b.Generation, nil
	}
	wa, ha, err := f.Ledger.Open(ctx, a)
	if err != nil {
		return 0, 0, err
	}
	defer ha.Close()
	wb, hb, err := f.Ledger.Open(ctx, b)
	if err != nil {
		return 0, 0, err
	}
	defer hb.Close()
	var sizes [2]int64
	for i, h := range []Writer{ha, hb} {
		name := [2]string{a.Name, b.Name}[i]
		if err := h.File().Sync(); err != nil {
			return 0, 0, fmt.Errorf("syncing %s before exchanging it: %w", name, err)
		}
		// The file says how big it is (writes through passthrough
		// handles still open count only when they close).
		st, err := h.File().Stat()
		if err != nil {
			return 0, 0, fmt.Errorf("exchanging %s: %w", name, err)
		}
		sizes[i] = st.Size()
	}
	idA, idB := f.Journal.NewID(), f.Journal.NewID() // the new records of a.Name and b.Name
	x, err := f.Ledger.Exchange(ctx, wa, wb, a.Name, b.Name, idA, idB, sizes[0], sizes[1])
	if err != nil {
		return 0, 0, err
	}
	if err := f.commit(x); err != nil {
		x.Ending.Undo(err)
		return 0, 0, fmt.Errorf("exchanging %s and %s in the cache index: %w", a.Name, b.Name, err)
	}
	bases := x.Ending.Apply()
	return bases[0], bases[1], nil
}

// commit makes b's cache files (the new names share the bytes: hard
// links, no copy) and writes its journal entry: every record in one
// entry, so that after a crash all or none. On error it has removed the
// files it made.
func (f Flow[W]) commit(b Begun) error {
	for i, l := range b.Links {
		if err := f.Journal.LinkFile(l.From, l.To); err != nil {
			f.remove(b.Links[:i])
			return err
		}
	}
	err := f.Journal.Append(b.Ops...)
	if err != nil {
		f.remove(b.Links)
	}
	return err
}

// remove removes the cache files links made.
func (f Flow[W]) remove(links []Link) {
	for _, l := range links {
		os.Remove(f.Path(l.To))
	}
}

// detach gives a renamed file's old name, now the deletion tomb, a cache
// file of its own; if it fails, the next start does it (the load does so
// for every deletion).
func (f Flow[W]) detach(name string, tomb *durable.Record) {
	if err := f.Detach(tomb.ID, name, *tomb); err != nil {
		f.Log.Warn("giving a renamed file's old name a file of its own failed", "object", name, "err", err)
	}
}
