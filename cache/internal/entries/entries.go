// Package entries is the state a cache keeps of one cached object
// version, its entry: the record it keeps in the index, and the facts
// of the subsystems that work on it, in groups (its place in the index
// and the space it counts; the filling and checking of its copy; its
// local changes and their uploads; the holds its pending copy keeps; the
// order of its record's writes). It owns
//
//	the fields   what each group keeps, said field by field
//	the rules    of one entry alone: a change settled (Clean), changed
//	             since (Dirtied), stuck (StuckSince), content that is a
//	             copy of the bucket's (CleanContent), every chunk
//	             checked (AllChecked)
//	the order    of the writes of its record: each snapshot numbered
//	             (Snapshot), none written after a later one (Persist)
//
// It decides nothing that needs another entry or the cache: which
// entries exist, when one changes, what it is charged, which transfer
// runs and how renames move entries are package cache's, which keeps the
// entries in its index and the handles open on them beside this state
// (in its own entry type, which embeds Entry).
//
// Invariants of one entry (package cache checks them, with those that
// tie entries to the rest of the cache, whenever it releases its lock):
//   - a clean entry has no DirtySince (Clean clears it);
//   - Inflight >= 0, and Refs >= Writers;
//   - a record is written only through Persist with a number Snapshot
//     gave: a later state is never overwritten by an earlier one.
//
// Locks: an Entry has one lock of its own, PersistMu, which orders the
// writes of its record (Persist takes it; package cache also holds it
// across a journal entry that turns the entry into a deletion). Every
// other field is guarded by the owner's lock (in package cache,
// Cache.mu), a plain structure as a map would be: the methods below but
// Persist are called with it held, and take no lock. PersistMu is never
// taken with the owner's lock held, and Persist calls the journal
// (package durable, whose locks are leaves) with it held.
package entries

import (
	"container/list"
	"os"
	"sync"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/fetch"
	"github.com/bucketfs/bucketfs/cache/internal/verify"
)

// Entry is one cached object version, by group; the zero value but
// Name, Rec and Ready (New) is an entry nothing has happened to.
type Entry struct {
	Name  string
	Rec   durable.Record
	Ready chan struct{} // closed once the record and file exist (or failed)
	Err   error         // creation failure, set before Ready is closed

	index
	filling
	writeBack
	holds
	persist
}

// New is the entry of name with record rec, not ready.
func New(name string, rec durable.Record) Entry {
	return Entry{Name: name, Rec: rec, Ready: make(chan struct{})}
}

// index is an entry's place in the index, and the space it counts.
type index struct {
	Elem    *list.Element // in the cache's LRU list while indexed
	Refs    int           // open handles
	Dropped bool          // no longer indexed: remove the file when the last handle goes
	Charged int64         // bytes this entry counts in the budget's Used (the cache's costOf)
	Spare   *os.File      // the new data file, open read-write, until an open for writing takes it
	Aside   bool          // set aside by a rename whose journal entry is being written
}

// filling is the filling and checking of an entry's copy.
type filling struct {
	Fill      fetch.Fill     // its download, whether a prefetch made it (package fetch)
	Checked   verify.Checked // chunks checked against their sums, or fetched, by this process (package verify)
	Verifying chan struct{}  // closed when the background check of the copy ends; nil when none runs
}

// writeBack is an entry's local changes and their uploads.
type writeBack struct {
	Writers      int           // handles open for writing
	Version      uint64        // bumped by every local change; not persisted
	Changes      uint64        // content changes begun; not persisted
	Dirtying     chan struct{} // closed once the dirty flag is durable
	DirtyErr     error         // why the dirty flag could not be recorded
	DirtySince   time.Time     // when it went from clean to dirty; zero if clean, or dirty since the start
	Uploading    bool          // an upload of this entry runs
	Retries      int           // failed uploads in a row
	Inflight     int           // changes begun and not ended
	Forced       bool          // a flush of the name asked: upload even while open for writing
	RemoteMoved  bool          // announced changed in the bucket: sent at the last close, with no write-back delay
	UploadSeq    uint64        // uploads started
	UploadedSeq  uint64        // the last upload started that succeeded
	UploadedHere bool          // Rec.Generation was written by this cache's upload
	RebasedFrom  int64         // what Rec.Generation was before the cache based it on a replaced content's upload (RebasedTo); 0 if it did not
	RebasedTo    int64         // the generation it based Rec on
	Invalids     int           // uploads refused as invalid in a row, with nothing changed between
	RefusedAt    time.Time     // when the bucket last refused an upload in a way a person can fix; zero since a success
	RefusedWhy   string        // what it said then
	Left         uint64        // bumped whenever the content leaves the name (orphaned, or its handles moved): an open for writing under way sees it, as it sees Dropped
}

// holds are the holds an entry's pending copy keeps on its source.
type holds struct {
	Holding string // the name whose version this entry's pending copy holds
	DlHold  string // the name whose version the download reads for a pending copy, held while it runs
}

// persist orders the writes of snapshots of an entry's Rec (Persist).
type persist struct {
	RecSeq       uint64     // guarded by the owner's lock: number of the last snapshot taken
	PersistMu    sync.Mutex // serialises writes of this entry's record; taken without the owner's lock
	PersistedSeq uint64     // guarded by PersistMu: number of the last snapshot written
}

// Clean records that e has no change left to send.
func (e *Entry) Clean() {
	e.Rec.Dirty, e.Dirtying, e.DirtySince = false, nil, time.Time{}
}

// Dirtied notes when e went from clean to changed: now, unless it was
// changed already.
func (e *Entry) Dirtied(now time.Time) {
	if e.DirtySince.IsZero() {
		e.DirtySince = now
	}
}

// StuckSince reports whether e's change waits for something no upload
// will bring by itself: it is held, or the bucket refused an upload of
// it (in a way a person can fix) at or after start.
func (e *Entry) StuckSince(start time.Time) bool {
	return e.Rec.HeldWhy() != "" || (e.RefusedWhy != "" && !e.RefusedAt.Before(start))
}

// CleanContent reports whether e's file is (a copy of) a version in the
// bucket, which its sums describe and which can be fetched again.
func (e *Entry) CleanContent() bool {
	return !e.Rec.LocalContent() && !e.Rec.Deleted && e.Rec.Damaged == ""
}

// AllChecked reports whether every chunk of e's copy was checked (or
// fetched) in this process, or cannot be: then it may be handed to the
// kernel.
func (e *Entry) AllChecked() bool {
	if len(e.Rec.Sums) == 0 || e.Rec.Deleted {
		return true // nothing recorded to check against
	}
	for i := range e.Rec.Chunks() {
		if _, ok := e.Rec.ChunkSum(i); ok && !e.Checked.Has(i) {
			return false
		}
	}
	return true
}

// Snapshot copies e's record for Persist, numbered so that a later state
// is never overwritten by an earlier one; a journal entry that writes e's
// record by other means takes a number too (RecSeq++).
func (e *Entry) Snapshot() (durable.Record, uint64) {
	e.RecSeq++
	return e.Rec, e.RecSeq
}

// Persist writes snapshot rec (number seq) as e's record to j (it then
// survives a crash of the process; a sync of j makes it survive a power
// loss), unless a later snapshot has been written already: then it
// writes nothing and reports false. Called without the owner's lock.
func (e *Entry) Persist(j *durable.Journal, rec durable.Record, seq uint64) (bool, error) {
	e.PersistMu.Lock()
	defer e.PersistMu.Unlock()
	if seq <= e.PersistedSeq {
		return false, nil
	}
	if err := j.Append(durable.PutOp(e.Name, rec, rec.ID)); err != nil {
		return false, err
	}
	e.PersistedSeq = seq
	return true, nil
}
