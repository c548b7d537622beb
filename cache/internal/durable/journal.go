package durable

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
	"sync/atomic"
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
// the journal is emptied) every CheckpointEvery, when it grows long, and
// before any change that goes straight to bbolt (so that changes reach
// bbolt in the order they were made).
//
// At start the journal is replayed into bbolt up to its first torn or
// corrupt entry (a power loss can tear what was never synced), and
// emptied.
//
// Entry format: 4 bytes little-endian payload length, 4 bytes CRC-32C of
// the payload, the payload (a JSON array of Ops, applied together
// or not at all).
//
// Record IDs (which name data files) are handed out here, from a counter
// kept in bbolt's sequence of the objects bucket and advanced past every
// ID seen in the journal.
//
// A record that survives a power loss must name a data file that
// survives it too: not only the file's bytes (its own fsync) but its
// name in the data directory, which POSIX makes durable only with an
// fsync of the directory (ext4 and XFS happen to carry it along with the
// next fsync of any file; others need not). The cache tells the journal
// of every data file it makes (MadeFile) before a record names it, and
// the journal syncs the directory before its own sync and before each
// checkpoint, if a file was made since the last time.

const (
	// CheckpointEvery is how often the cache applies the journal to bbolt.
	CheckpointEvery = time.Second
	checkpointOps   = 4096
	maxJournalEntry = 64 << 20 // longer lengths mean a torn or corrupt entry (a record of a 5 TiB object with its chunk sums takes about 4 MiB)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Op is one change of the objects bucket.
type Op struct {
	Name string  `json:"n"`
	Rec  *Record `json:"r,omitempty"` // nil: delete the record
	// IfID, if not 0, applies the change only if name's record names
	// this data file (it may have been evicted or replaced since).
	IfID uint64 `json:"if,omitempty"`
}

// Journal is the write-ahead log of the index. Its methods are safe for
// concurrent use; mu orders appends and checkpoints. Under mu only the
// OnAppend hook (a Describer's lock) and Update's fn run; the journal does
// disk I/O, so it is never called with a caller's state lock held.
type Journal struct {
	db *bolt.DB

	mu      sync.Mutex
	f       *os.File // guarded by mu: opened for appending
	size    int64    // guarded by mu: bytes of whole entries in f
	pending []Op     // guarded by mu: in f, not yet in db
	nextID  uint64   // guarded by mu: the next record ID to hand out
	broken  error    // guarded by mu: f could not be cut back after a failed append

	onAppend func([]Op) // guarded by mu: see OnAppend

	dataDir    string        // synced before the records (MadeFile); "" for none
	made       atomic.Uint64 // data files made so far (MadeFile)
	madeSynced uint64        // guarded by mu: made when dataDir was last synced
}

// OpenJournal replays the journal at path into db, empties it, and
// returns it open for appending, with the number of changes replayed.
// dataDir is the directory of the data files the records name, synced
// before them (MadeFile); "" if the caller makes no data file.
func OpenJournal(db *bolt.DB, path, dataDir string) (*Journal, int, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("opening the cache journal: %w", err)
	}
	ops, err := ReadJournal(f)
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("reading the cache journal %s: %w", path, err)
	}
	j := &Journal{db: db, f: f, pending: ops, dataDir: dataDir}
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
	if err := j.Update(nil); err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("applying the cache journal: %w", err)
	}
	return j, len(ops), nil
}

// ReadJournal returns the changes of the whole entries of r, in order,
// up to the first torn or corrupt one.
func ReadJournal(r io.Reader) ([]Op, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var ops []Op
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
		var entry []Op
		if err := json.Unmarshal(payload, &entry); err != nil || len(entry) == 0 {
			break
		}
		ops = append(ops, entry...)
		data = data[8+n:]
	}
	return ops, nil
}

// NewID hands out a record ID never used before in this cache.
func (j *Journal) NewID() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	id := j.nextID
	j.nextID++
	return id
}

// AdvancePast makes every ID handed out from now on higher than id (a
// data file found on disk may be named by it).
func (j *Journal) AdvancePast(id uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.nextID <= id {
		j.nextID = id + 1
	}
}

// PutOp is "name's record is rec" (if its record names file ifID, or
// always with ifID 0).
func PutOp(name string, rec Record, ifID uint64) Op {
	return Op{Name: name, Rec: &rec, IfID: ifID}
}

// RemoveOp is "name has no record" (if its record names file ifID, or
// always with ifID 0).
func RemoveOp(name string, ifID uint64) Op {
	return Op{Name: name, IfID: ifID}
}

// Append writes ops as one entry: after a crash, all of them are replayed
// or none. When append returns, they survive a crash of the process.
func (j *Journal) Append(ops ...Op) error {
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

// MadeFile tells the journal that a data file was made in the data
// directory (created, or linked into it): every sync and checkpoint
// after the call makes the file's name durable before the records it
// makes durable (see the top of this file). Call it once the file is
// made, before any record that needs the file's bytes is appended.
func (j *Journal) MadeFile() { j.made.Add(1) }

// DataFiles reports how many data files were made (MadeFile), and how
// many of them before the data directory's last sync: those names are
// durable.
func (j *Journal) DataFiles() (made, synced uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.made.Load(), j.madeSynced
}

// syncDir fsyncs directory dir (tests replace it).
var syncDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDataDirLocked makes the names of the data files made so far
// durable, if any was made since the last time.
func (j *Journal) syncDataDirLocked() error {
	n := j.made.Load()
	if j.dataDir == "" || n == j.madeSynced {
		return nil
	}
	if err := syncDir(j.dataDir); err != nil {
		return fmt.Errorf("syncing the cache's data directory: %w", err)
	}
	j.madeSynced = n
	return nil
}

// Sync makes every change appended so far survive a power loss, with
// the names of the data files made before them.
func (j *Journal) Sync() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.syncDataDirLocked(); err != nil {
		return err
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("syncing the cache journal: %w", err)
	}
	return nil
}

// Update applies the pending changes and then fn (if not nil) in one
// synced bbolt commit, and empties the journal. fn sees the index with
// every change made so far.
func (j *Journal) Update(fn func(tx *bolt.Tx) error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.updateLocked(fn)
}

func (j *Journal) updateLocked(fn func(tx *bolt.Tx) error) error {
	if len(j.pending) == 0 && fn == nil {
		return nil
	}
	if err := j.syncDataDirLocked(); err != nil {
		return err // everything stays pending: the next checkpoint tries again
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
		return ReserveIDs(tx, j.nextID-1)
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
func applyOps(tx *bolt.Tx, ops []Op) error {
	for _, op := range ops {
		if op.IfID != 0 {
			if id, ok := recordID(tx, op.Name); !ok || id != op.IfID {
				continue
			}
		}
		if op.Rec == nil {
			if err := DeleteRecord(tx, op.Name); err != nil {
				return err
			}
			continue
		}
		rec := *op.Rec
		if err := PutRecord(tx, op.Name, &rec); err != nil {
			return err
		}
	}
	return nil
}

// Records returns the index as a crash now would leave it: bbolt's
// records with the pending changes applied.
func (j *Journal) Records() (map[string]Record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	recs, err := LoadRecords(j.db)
	if err != nil {
		return nil, err
	}
	Apply(recs, j.pending)
	return recs, nil
}

// Apply applies ops to recs as a replay would.
func Apply(recs map[string]Record, ops []Op) {
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

// Close checkpoints and closes the journal file.
func (j *Journal) Close() error {
	err := j.Update(nil)
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

// OnAppend sets fn to be told the changes of each entry appended, under
// the journal's lock, in order (a Describer's Journaled: the data files
// describe themselves, describe.go). fn must take no lock but leaves.
func (j *Journal) OnAppend(fn func([]Op)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.onAppend = fn
}

// Abandon closes the journal file without a checkpoint, as a crash
// would leave it (for a failed open, and for tests of crashes). The
// journal is not to be used after.
func (j *Journal) Abandon() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.f.Close()
}

// PeekID returns the next ID NewID would hand out, without taking it.
func (j *Journal) PeekID() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.nextID
}

// SetBroken makes every Append fail with err until the next successful
// checkpoint (err nil: until now), as a failed cut of the journal file
// does. For tests of a journal that cannot be written.
func (j *Journal) SetBroken(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.broken = err
}
