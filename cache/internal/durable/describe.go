package durable

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Self-describing data files: a lost or damaged index.db can be rebuilt
// from data/ alone (cache/internal/recovery).
//
// Every data file carries, in the extended attribute user.bucketfs.record,
// a description of the record that names it: the object name, the
// generation its content is based on, and the dirty, deleted, metadata-only
// and pending-copy state (see Description). It never holds the chunk
// bitmap: a rebuilt clean copy is simply dropped (its bytes are in the
// bucket), and a rebuilt changed copy is whole by definition. A clean
// copy's description is its ID alone (about 20 bytes, kept inside an ext4
// inode); a changed file's is longer and costs ext4 a 4 KiB block until
// it is clean again.
//
// When it is written:
//   - After every journal entry, for each record it puts (Journal.OnAppend,
//     under the journal's lock, so descriptions follow the journal's order):
//     a description only ever lags the journal, never leads it. A record is
//     marked dirty in the journal before the first byte of a change is
//     written, so the description says dirty before the file holds bytes
//     that are not in the bucket.
//   - By DescribeFile, on the new file, before any byte is written (the
//     journal entry that made the record came before the file).
//   - By Detach, on the new inode it gives a deleted record.
//
// Hard links: a rename links the data file under a new ID, so both IDs
// name one inode, and one description. The description carries its ID:
// a description names the ID that owns the inode. A put of a new record
// (IfID 0: create, rename, exchange, directory rename) takes the inode
// over; an update of an existing record (IfID set) writes only if the
// inode is still its own. A deletion never takes a shared inode over:
// what it would write is kept (owed) until Detach gives it an inode of
// its own.
//
// A filesystem without user extended attributes (or one that refuses a
// description) degrades: a description too big loses its metadata and
// upload IDs first (Partial), and a file whose description cannot be
// written loses the stale one, so that a rebuild puts it in lost+found
// instead of trusting an older state.

// DescribeAttr is the extended attribute holding a data file's description.
const DescribeAttr = "user.bucketfs.record"

// Description is what a data file says about itself (JSON in
// DescribeAttr).
type Description struct {
	V          int               `json:"v"`
	ID         uint64            `json:"id"`             // the record ID the inode belongs to
	Name       string            `json:"name,omitempty"` // the object name
	Generation int64             `json:"gen,omitempty"`
	Size       int64             `json:"size,omitempty"`
	Complete   bool              `json:"complete,omitempty"`
	Dirty      bool              `json:"dirty,omitempty"`
	Deleted    bool              `json:"deleted,omitempty"`
	MetaOnly   bool              `json:"meta_only,omitempty"`
	CopyFrom   string            `json:"copy_from,omitempty"`
	CopyGen    int64             `json:"copy_gen,omitempty"`
	CopyType   string            `json:"copy_type,omitempty"`
	Meta       map[string]string `json:"meta,omitempty"`
	Attempts   []string          `json:"attempts,omitempty"`
	// Damaged: the file is held for a failed checksum check (cache/checksum.go);
	// a rebuilt record stays held.
	Damaged string `json:"damaged,omitempty"`
	// Refused: held because the bucket refused its upload (cache/refusal.go).
	Refused string `json:"refused,omitempty"`
	// Partial: Meta and Attempts were left out, too big for the
	// filesystem's extended attributes.
	Partial bool `json:"partial,omitempty"`
	// Dropped: the record was removed from the index (evicted, or its
	// deletion reached the bucket); the file is about to go.
	Dropped bool `json:"dropped,omitempty"`
}

// Describe is the description of name's record r. A clean record's is
// its ID alone: a rebuild drops a clean copy (its bytes are in the
// bucket), and a short value stays inside the inode (ext4 gives a longer
// one a 4 KiB block of its own).
func Describe(name string, r Record) Description {
	if !r.Dirty {
		return Description{V: 1, ID: r.ID}
	}
	return Description{
		V: 1, ID: r.ID, Name: name, Generation: r.Generation, Size: r.Size,
		Complete: r.Complete, Dirty: r.Dirty, Deleted: r.Deleted, MetaOnly: r.MetaOnly,
		CopyFrom: r.CopyFrom, CopyGen: r.CopyGen, CopyType: r.CopyType,
		Meta: r.Meta, Attempts: r.Attempts, Damaged: r.Damaged, Refused: r.Refused,
	}
}

// LocalContent reports whether the file holds bytes that are not in the
// bucket, as Record.LocalContent.
func (d *Description) LocalContent() bool {
	return d.Dirty && !d.Deleted && !d.MetaOnly && d.CopyFrom == "" && !d.Dropped
}

// Record turns d back into a record naming data file id, whose size on
// disk is size.
func (d *Description) Record(id uint64, size, chunkSize int64) Record {
	r := Record{
		ID: id, Generation: d.Generation, Size: d.Size, ChunkSize: chunkSize,
		Complete: d.Complete, Dirty: d.Dirty, Deleted: d.Deleted, MetaOnly: d.MetaOnly,
		CopyFrom: d.CopyFrom, CopyGen: d.CopyGen, CopyType: d.CopyType,
		Meta: d.Meta, Attempts: d.Attempts, Damaged: d.Damaged, Refused: d.Refused,
	}
	switch {
	case d.Deleted:
		r.Size, r.Complete = 0, true
	case d.LocalContent():
		r.Size, r.Complete = size, true // the file is the truth
	}
	return r
}

// Describer writes descriptions. Its lock is a leaf, taken under the
// journal's lock (Journaled) or, by the other methods, under no lock of
// this package (callers may hold their own, never a state lock).
type Describer struct {
	dataDir string
	log     *slog.Logger

	mu     sync.Mutex
	off    bool                   // guarded by mu: the filesystem keeps no user xattrs
	owed   map[uint64]Description // guarded by mu: deletions waiting for an inode of their own
	warned bool                   // guarded by mu: the one warning about descriptions was logged
}

// NewDescriber probes whether dataDir keeps user extended attributes.
func NewDescriber(dataDir string, log *slog.Logger) *Describer {
	d := &Describer{dataDir: dataDir, log: log, owed: map[uint64]Description{}}
	f, err := os.CreateTemp(dataDir, ".probe-*")
	if err != nil {
		return d // checkWritable reported it already
	}
	err = unix.Fsetxattr(int(f.Fd()), DescribeAttr, []byte(`{}`), 0)
	f.Close()
	os.Remove(f.Name())
	if err != nil {
		d.off = true
		d.warnLocked(err)
	}
	return d
}

func (d *Describer) warnLocked(err error) {
	if d.warned {
		return
	}
	d.warned = true
	d.log.Warn("the cache disk does not keep extended attributes (user.bucketfs.record): if the cache index is lost or damaged, changed files that are not uploaded yet cannot be placed again and go to lost+found; mount the cache disk with user xattrs (ext4, xfs) to avoid it",
		"dir", d.dataDir, "err", err)
}

// path of data file id.
func (d *Describer) path(id uint64) string { return DataPath(d.dataDir, id) }

// Journaled writes the descriptions of the records ops put, and marks the
// files of records ops remove as dropped. Called by the journal, under
// its lock, after ops were appended.
func (d *Describer) Journaled(ops []Op) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.off {
		return
	}
	for _, op := range ops {
		if op.Rec == nil {
			d.dropLocked(op)
			continue
		}
		d.putLocked(op)
	}
}

func (d *Describer) putLocked(op Op) {
	path := d.path(op.Rec.ID)
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return // not made yet (create describes it) or gone
	}
	desc := Describe(op.Name, *op.Rec)
	cur, _ := ReadDescription(path)
	own := cur == nil || cur.ID == op.Rec.ID
	if (op.Rec.Deleted && st.Nlink > 1) || (op.IfID != 0 && !own) {
		// The inode holds another ID's bytes (a rename's new name):
		// a deletion waits for detachData, a stale update is dropped.
		if op.Rec.Deleted {
			d.owed[op.Rec.ID] = desc
		}
		return
	}
	delete(d.owed, op.Rec.ID)
	d.writeLocked(path, -1, desc)
}

func (d *Describer) dropLocked(op Op) {
	if op.IfID == 0 {
		return
	}
	path := d.path(op.IfID)
	cur, _ := ReadDescription(path)
	if cur == nil || cur.ID != op.IfID {
		return
	}
	d.writeLocked(path, -1, Description{V: 1, ID: op.IfID, Dropped: true})
}

// DescribeFile writes rec's description onto f (a new data file), before
// any byte is written to it.
func (d *Describer) DescribeFile(f *os.File, name string, rec Record) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.off {
		return
	}
	d.writeLocked(f.Name(), int(f.Fd()), Describe(name, rec))
}

// Backfill describes the data files of recs that carry no description
// (bare: made by a bucketfs before descriptions, or whose description
// could not be written): the index is sound now, so it is the truth. It
// returns how many it described.
func (d *Describer) Backfill(recs map[string]Record, bare map[uint64]bool) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.off {
		return 0
	}
	n := 0
	for name, r := range recs {
		if bare[r.ID] {
			d.writeLocked(d.path(r.ID), -1, Describe(name, r))
			n++
		}
	}
	return n
}

// writeLocked sets desc on the file (by descriptor if fd >= 0, else by
// path). A description too big is written without its metadata; one
// that cannot be written at all is removed, so that no older state
// outlives the change.
func (d *Describer) writeLocked(path string, fd int, desc Description) {
	err := SetDescription(path, fd, desc)
	if errors.Is(err, unix.E2BIG) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ERANGE) {
		desc.Meta, desc.Attempts, desc.Partial = nil, nil, true
		err = SetDescription(path, fd, desc)
	}
	if err == nil {
		return
	}
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
		d.off = true
		d.warnLocked(err)
	}
	var rerr error
	if fd >= 0 {
		rerr = unix.Fremovexattr(fd, DescribeAttr)
	} else {
		rerr = unix.Removexattr(path, DescribeAttr)
	}
	if rerr != nil && !errors.Is(rerr, unix.ENODATA) && !errors.Is(rerr, unix.ENOENT) {
		d.log.Error("a cache file's description could not be written nor removed: a rebuild of a lost index could misjudge it", "file", path, "object", desc.Name, "err", err, "remove_err", rerr)
		return
	}
	d.log.Warn("writing a cache file's description failed: if the index is lost, this file goes to lost+found", "file", path, "object", desc.Name, "err", err)
}

// SetDescription sets desc on the file (by descriptor if fd >= 0, else
// by path), as it is: no fallback (see Describer).
func SetDescription(path string, fd int, desc Description) error {
	v, err := json.Marshal(desc)
	if err != nil {
		return err
	}
	if fd >= 0 {
		return unix.Fsetxattr(fd, DescribeAttr, v, 0)
	}
	return unix.Setxattr(path, DescribeAttr, v, 0)
}

// ReadDescription returns the description of the file at path; nil (and
// no error) if it has none.
func ReadDescription(path string) (*Description, error) {
	buf := make([]byte, 4096)
	for {
		n, err := unix.Getxattr(path, DescribeAttr, buf)
		if errors.Is(err, unix.ERANGE) && len(buf) < 1<<20 {
			buf = make([]byte, 4*len(buf))
			continue
		}
		if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var d Description
		if err := json.Unmarshal(buf[:n], &d); err != nil || d.V == 0 {
			return nil, fmt.Errorf("unreadable description: %v", err)
		}
		return &d, nil
	}
}

// detachDescLocked returns the description of the new inode Detach gives
// record id: what a deletion owes it, else the old inode's if it is id's
// own, else fallback.
func (d *Describer) detachDescLocked(id uint64, fallback Description) Description {
	if o, ok := d.owed[id]; ok {
		delete(d.owed, id)
		return o
	}
	if cur, _ := ReadDescription(d.path(id)); cur != nil && cur.ID == id && !cur.Dropped {
		return *cur
	}
	return fallback
}

// Detach gives data file id a new, empty inode of its own, described as
// what a deletion owes it, else as the old inode if that is id's own,
// else as fallback (Describe of the deleted record). The old inode keeps
// its bytes for its other links. Called only after the deletion is in
// the journal.
func (d *Describer) Detach(id uint64, fallback Description) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, err := os.CreateTemp(d.dataDir, ".detach-*") // a stray if a crash leaves it: removed at start
	if err != nil {
		return err
	}
	tmp := f.Name()
	if !d.off {
		d.writeLocked(tmp, int(f.Fd()), d.detachDescLocked(id, fallback))
	}
	f.Close()
	if err := os.Rename(tmp, d.path(id)); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
