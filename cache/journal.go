package cache

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The journal makes a change of the index cheap and still safe.
//
// A bbolt commit is durable only after two fdatasyncs, which cost more
// than creating a small file. The durability contract asks less of most
// changes: they must survive a crash of the process, and survive a power
// loss only once the application calls fsync. So a change (a record put or
// deleted) is appended to CACHE_DIR/journal with one write(2): from then
// on it is in the kernel's page cache, which outlives the process. The
// journal is synced when an application calls fsync, and applied to bbolt
// in batches (a checkpoint: one synced commit of everything pending, then
// the journal is emptied) every checkpointEvery, when it grows long, and
// before any change that goes straight to bbolt (so that changes reach
// bbolt in the order they were made).
//
// At start the journal is replayed into bbolt up to its first torn or
// corrupt entry (a power loss can tear what was never synced), and
// emptied.
//
// Entry format: 4 bytes little-endian payload length, 4 bytes CRC-32C of
// the payload, the payload (a JSON array of journalOps, applied together
// or not at all).
//
// Record IDs (which name data files) are handed out here, from a counter
// kept in bbolt's sequence of the objects bucket and advanced past every
// ID seen in the journal.

const (
	journalName     = "journal"
	checkpointEvery = time.Second
	checkpointOps   = 4096
	maxJournalEntry = 64 << 20 // longer lengths mean a torn or corrupt entry (a record of a 5 TiB object with its chunk sums takes about 4 MiB)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// journalOp is one change of the objects bucket.
type journalOp struct {
	Name string  `json:"n"`
	Rec  *record `json:"r,omitempty"` // nil: delete the record
	// IfID, if not 0, applies the change only if name's record names
	// this data file (it may have been evicted or replaced since).
	IfID uint64 `json:"if,omitempty"`
}

// journal is the write-ahead log of the index. Its methods are safe for
// concurrent use; mu orders appends and checkpoints. mu is a leaf lock
// (nothing else is taken under it), but the journal does disk I/O, so it
// is not called with Cache.mu held.
type journal struct {
	db *bolt.DB

	mu      sync.Mutex
	f       *os.File    // guarded by mu: opened for appending
	size    int64       // guarded by mu: bytes of whole entries in f
	pending []journalOp // guarded by mu: in f, not yet in db
	nextID  uint64      // guarded by mu: the next record ID to hand out
	broken  error       // guarded by mu: f could not be cut back after a failed append

	// onAppend, if set, is told the changes of each entry appended, under
	// mu, in order (the data files describe themselves: describe.go). It
	// must not take locks other than leaves.
	onAppend func([]journalOp)
}

// openJournal replays the journal at path into db, empties it, and
// returns it open for appending.
func openJournal(db *bolt.DB, path string) (*journal, int, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("opening the cache journal: %w", err)
	}
	ops, err := readJournal(f)
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("reading the cache journal %s: %w", path, err)
	}
	j := &journal{db: db, f: f, pending: ops}
	err = db.View(func(tx *bolt.Tx) error {
		j.nextID = tx.Bucket(objectsBucket).Sequence() + 1
		return nil
	})
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	for _, op := range ops {
		if op.Rec != nil && op.Rec.ID >= j.nextID {
			j.nextID = op.Rec.ID + 1
		}
	}
	if err := j.update(nil); err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("applying the cache journal: %w", err)
	}
	return j, len(ops), nil
}

// readJournal returns the whole entries of r, in order, up to the first
// torn or corrupt one.
func readJournal(r io.Reader) ([]journalOp, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var ops []journalOp
	for len(data) >= 8 {
		n := binary.LittleEndian.Uint32(data[0:4])
		sum := binary.LittleEndian.Uint32(data[4:8])
		if n > maxJournalEntry || int(n) > len(data)-8 {
			break
		}
		payload := data[8 : 8+n]
		if crc32.Checksum(payload, castagnoli) != sum {
			break
		}
		var entry []journalOp
		if err := json.Unmarshal(payload, &entry); err != nil || len(entry) == 0 {
			break
		}
		ops = append(ops, entry...)
		data = data[8+n:]
	}
	return ops, nil
}

// newID hands out a record ID never used before in this cache.
func (j *journal) newID() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	id := j.nextID
	j.nextID++
	return id
}

// advancePast makes every ID handed out from now on higher than id (a
// data file found on disk may be named by it).
func (j *journal) advancePast(id uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.nextID <= id {
		j.nextID = id + 1
	}
}

// putOp is "name's record is rec" (if its record names file ifID, or
// always with ifID 0).
func putOp(name string, rec record, ifID uint64) journalOp {
	return journalOp{Name: name, Rec: &rec, IfID: ifID}
}

// removeOp is "name has no record" (if its record names file ifID, or
// always with ifID 0).
func removeOp(name string, ifID uint64) journalOp {
	return journalOp{Name: name, IfID: ifID}
}

// append writes ops as one entry: after a crash, all of them are replayed
// or none. When append returns, they survive a crash of the process.
func (j *journal) append(ops ...journalOp) error {
	for _, op := range ops {
		if op.Name == "" || (op.Rec != nil && op.Rec.ID == 0) {
			return fmt.Errorf("cache journal: bad change %+v", op)
		}
	}
	payload, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if len(payload) > maxJournalEntry {
		// The replay would stop here and drop every later change.
		return fmt.Errorf("cache journal: a change of %d bytes is over the limit of %d", len(payload), maxJournalEntry)
	}
	buf := make([]byte, 8+len(payload))
	binary.LittleEndian.PutUint32(buf[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(buf[4:8], crc32.Checksum(payload, castagnoli))
	copy(buf[8:], payload)

	j.mu.Lock()
	defer j.mu.Unlock()
	if j.broken != nil {
		return j.broken
	}
	if _, err := j.f.Write(buf); err != nil {
		// A torn entry would hide every later one from the replay: cut
		// it off, or stop appending.
		if terr := j.f.Truncate(j.size); terr != nil {
			j.broken = fmt.Errorf("cache journal unusable after a failed write (%v): %w", err, terr)
		}
		return fmt.Errorf("writing the cache journal: %w", err)
	}
	j.size += int64(len(buf))
	j.pending = append(j.pending, ops...)
	if j.onAppend != nil {
		j.onAppend(ops)
	}
	if len(j.pending) >= checkpointOps {
		// The change is recorded whatever happens here: a failed
		// checkpoint keeps everything pending (the checkpointer retries),
		// and is not this change's failure.
		_ = j.updateLocked(nil)
	}
	return nil
}

// sync makes every change appended so far survive a power loss.
func (j *journal) sync() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("syncing the cache journal: %w", err)
	}
	return nil
}

// update applies the pending changes and then fn (if not nil) in one
// synced bbolt commit, and empties the journal. fn sees the index with
// every change made so far.
func (j *journal) update(fn func(tx *bolt.Tx) error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.updateLocked(fn)
}

func (j *journal) updateLocked(fn func(tx *bolt.Tx) error) error {
	if len(j.pending) == 0 && fn == nil {
		return nil
	}
	err := j.db.Update(func(tx *bolt.Tx) error {
		if err := applyOps(tx, j.pending); err != nil {
			return err
		}
		if fn != nil {
			if err := fn(tx); err != nil {
				return err
			}
		}
		b := tx.Bucket(objectsBucket)
		if b.Sequence() < j.nextID-1 {
			return b.SetSequence(j.nextID - 1)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Everything in the journal is in bbolt now, durably.
	j.pending = nil
	if err := j.f.Truncate(0); err != nil {
		j.broken = fmt.Errorf("emptying the cache journal: %w", err)
		return j.broken
	}
	j.size = 0
	j.broken = nil
	return nil
}

// applyOps carries out ops in order in tx.
func applyOps(tx *bolt.Tx, ops []journalOp) error {
	for _, op := range ops {
		if op.IfID != 0 {
			if id, ok := recordID(tx, op.Name); !ok || id != op.IfID {
				continue
			}
		}
		if op.Rec == nil {
			if err := tx.Bucket(objectsBucket).Delete([]byte(op.Name)); err != nil {
				return err
			}
			continue
		}
		rec := *op.Rec
		if err := putRecord(tx, op.Name, &rec); err != nil {
			return err
		}
	}
	return nil
}

// records returns the index as a crash now would leave it: bbolt's
// records with the pending changes applied.
func (j *journal) records() (map[string]record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	recs, err := loadRecords(j.db)
	if err != nil {
		return nil, err
	}
	applyJournal(recs, j.pending)
	return recs, nil
}

// applyJournal applies ops to recs as a start would.
func applyJournal(recs map[string]record, ops []journalOp) {
	for _, op := range ops {
		if op.IfID != 0 {
			if r, ok := recs[op.Name]; !ok || r.ID != op.IfID {
				continue
			}
		}
		if op.Rec == nil {
			delete(recs, op.Name)
		} else {
			recs[op.Name] = *op.Rec
		}
	}
}

// close checkpoints and closes the journal file.
func (j *journal) close() error {
	err := j.update(nil)
	j.mu.Lock()
	defer j.mu.Unlock()
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	if err == nil && j.broken != nil {
		err = j.broken
	}
	return err
}
