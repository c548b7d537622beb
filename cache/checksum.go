package cache

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/integrity"
	"github.com/bucketfs/bucketfs/cache/internal/verify"
	"github.com/bucketfs/bucketfs/transfer"
)

// Checksums of cached copies: the cache directory is not trusted
// blindly. What is checked and when, and the flows that read a data file
// to check it (a range of chunks, a copy at its open or before it is
// changed, in the background, a held file resolved), are package
// internal/verify's; this file keeps what they mean for an entry (the
// entry's side of the flows, verifyLedger): which chunks this process
// checked (entry.checked), dropped chunks and held files (hold), the sums
// an upload adopts, Resolve, and the reads of a write handle.

// ErrDamaged means a file with changes not yet in the bucket failed its
// checksum check: it is held, neither uploaded nor removed, until an
// operator keeps the local bytes or takes the bucket's version (Resolve).
var ErrDamaged = verify.ErrDamaged

// verifyLedger is entry e's side of the live checks of its copy
// (verify.Ledger; the contracts are on its methods there). Each method is
// one critical section of Cache.mu, called by the flows with no lock
// held; Drop and Hold then log and journal, Release and DropHeld remove
// the data files of entries they let go.
type verifyLedger struct {
	c *Cache
	e *entry
}

var _ verify.Ledger = verifyLedger{}

// State reads e's record, its download, writers and checked chunks.
func (l verifyLedger) State() verify.State {
	c, e := l.c, l.e
	c.mu.Lock()
	defer c.mu.Unlock()
	return verify.State{
		Name: e.Name, Held: e.Rec.Damaged, Clean: e.CleanContent(), Complete: e.Rec.Complete,
		Downloading: e.Fill.Download() != nil, Writing: e.Writers > 0, AllChecked: e.AllChecked(),
		Size: e.Rec.Size, Chunks: e.Rec.Chunks(), ID: e.Rec.ID,
	}
}

// Span reads the sums, the present bits and e.Checked of chunks [first,
// last], and e.Version.
func (l verifyLedger) Span(first, last int) verify.Span {
	c, e := l.c, l.e
	c.mu.Lock()
	defer c.mu.Unlock()
	s := verify.Span{
		First: first, Chunks: make([]verify.Chunk, 0, last-first+1),
		Clean: e.CleanContent(), Held: e.Rec.Damaged != "",
		ChunkSize: e.Rec.ChunkSize, Size: e.Rec.Size, Version: e.Version,
	}
	for i := first; i <= last; i++ {
		sum, ok := e.Rec.ChunkSum(i)
		present := e.Rec.Complete || durable.BitSet(e.Rec.Present, i)
		s.Chunks = append(s.Chunks, verify.Chunk{Checked: e.Checked.Has(i), HasSum: ok, Sum: sum, Present: present})
	}
	return s
}

// Settle sets e.Checked for the chunks checked, if e.Version and
// CleanContent are as s saw them.
func (l verifyLedger) Settle(s verify.Span, checked []int) (current, trust bool) {
	c, e := l.c, l.e
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.Version != s.Version || e.CleanContent() != s.Clean {
		return false, !e.CleanContent() && e.Rec.Damaged == ""
	}
	for _, i := range checked {
		e.Checked.Set(i, e.Rec.Chunks(), true)
	}
	return true, false
}

// Drop clears the present bits and e.Checked of the chunks bad, counted
// in Stats.ChecksumMismatches, noted, logged and journaled.
func (l verifyLedger) Drop(bad []int, why error) {
	c, e := l.c, l.e
	c.mu.Lock()
	if !e.CleanContent() || e.Fill.Download() != nil {
		c.mu.Unlock()
		return
	}
	present := e.Rec.PresentBools()
	for _, i := range bad {
		if i < len(present) {
			present[i] = false
		}
		e.Checked.Set(i, e.Rec.Chunks(), false)
	}
	e.Rec.SetPresent(present)
	c.stats.ChecksumMismatches++
	c.noteErrorLocked("check", e.Name, fmt.Errorf("%w: %v", verify.ErrBadCopy, why))
	rec, seq := e.Snapshot()
	c.mu.Unlock()
	c.log.Warn("a cached copy failed its checksum check: the bad chunks are dropped and fetched again from the bucket",
		"object", e.Name, "generation", rec.Generation, "chunks", len(bad), "err", why)
	if err := c.persistEntry(e, rec, seq); err != nil {
		c.log.Warn("recording dropped chunks failed", "object", e.Name, "err", err)
	}
}

// Hold is hold.
func (l verifyLedger) Hold(bad []int, why error) bool { return l.c.hold(l.e, l.e.Name, bad, why) }

// StartCheck sets e.Verifying to done and takes a reference (e.Refs).
func (l verifyLedger) StartCheck(done chan struct{}) (<-chan struct{}, string, uint64, int) {
	c, e := l.c, l.e
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case e.Verifying != nil:
		return e.Verifying, "", 0, 0
	case e.Dropped || c.closed:
		return nil, "", 0, 0
	}
	e.Verifying = done
	e.Refs++
	c.wg.Add(1) // under the lock that saw the cache open: Close waits for the check
	return done, e.Name, e.Rec.ID, e.Rec.Chunks()
}

// EndCheck clears e.Verifying.
func (l verifyLedger) EndCheck() {
	l.c.mu.Lock()
	l.e.Verifying = nil
	l.c.mu.Unlock()
}

// Release is release.
func (l verifyLedger) Release() { l.c.release(l.e) }

// DropHeld clears the hold (record.Damaged, record.Refused) and drops e
// (dropLocked), if it is still name's, with no writer, at version, with
// data file id. Tests pause before it (testAfterSaveLost).
func (l verifyLedger) DropHeld(name string, id, version uint64) bool {
	if testAfterSaveLost != nil {
		testAfterSaveLost(name)
	}
	c, e := l.c, l.e
	c.mu.Lock()
	// Any change since (a write closed already, a deletion and a file
	// made again in the same entry, a new data file) is not in what was
	// kept: nothing is dropped then.
	if c.entries[name] != e || e.Writers > 0 || e.Version != version || e.Rec.ID != id {
		c.mu.Unlock()
		return false
	}
	e.Rec.Damaged, e.Rec.Refused = "", ""
	e.Clean()
	victims := c.dropLocked(e)
	c.notifyLocked()
	c.mu.Unlock()
	c.removeAll(victims)
	return true
}

// testAfterSaveLost, set by tests only, runs in Resolve once the local
// bytes are kept in lost+found, before the entry is dropped.
var testAfterSaveLost func(name string)

// Confirm is confirm.
func (l verifyLedger) Confirm(name string, a transfer.ObjectAttrs, deleted bool) {
	l.c.confirm(name, a, deleted)
}

// sumsRef and fileSums are what an upload checks and carries
// (integrity.Ref, integrity.FileSums), by their names in this package.
// The scan before an upload is upload.Flow's; a failure it finds holds
// the file through hold (uploadLedger.Hold).
type (
	sumsRef  = integrity.Ref
	fileSums = integrity.FileSums
)

// hold marks e as damaged if the chunks bad are still not written here
// (a write during the check explains a difference), and reports whether
// it did.
func (c *Cache) hold(e *entry, name string, bad []int, why error) bool {
	c.mu.Lock()
	still := false
	for _, i := range bad {
		if !durable.BitSet(e.Rec.Written, i) && 4*(i+1) <= len(e.Rec.Sums) {
			still = true
		}
	}
	if !still || e.Dropped {
		c.mu.Unlock()
		return false
	}
	e.Rec.Damaged = why.Error()
	c.stats.ChecksumMismatches++
	c.noteErrorLocked("check", name, fmt.Errorf("%w: %v", ErrDamaged, why))
	rec, seq := e.Snapshot()
	c.notifyLocked()
	c.mu.Unlock()
	c.log.Error("a changed file failed its checksum check: bytes it did not write differ from the version they came from. It is held: not uploaded, not removed; reads answer EIO. Keep the local bytes or take the bucket's version with bucketfs resolve",
		"object", name, "err", why)
	if err := c.persistEntry(e, rec, seq); err != nil {
		c.log.Warn("recording a held file in the cache index failed; it is checked again at the next start", "object", name, "err", err)
	}
	return true
}

// adoptSumsLocked makes the sums an upload read the record's: the file
// is now the bucket's version attrs, every chunk checked.
func (c *Cache) adoptSumsLocked(e *entry, body fileSums, attrs transfer.ObjectAttrs) {
	if !body.OK || body.Chunk != e.Rec.ChunkSize {
		e.Rec.Sums, e.Rec.Written, e.Checked = nil, nil, nil
		return
	}
	e.Rec.Sums = make([]byte, 4*len(body.Sums))
	for i, v := range body.Sums {
		binary.BigEndian.PutUint32(e.Rec.Sums[4*i:], v)
	}
	e.Rec.Written = nil
	e.Rec.CRC32C = attrs.CRC32C
	e.Checked = verify.AllOf(len(body.Sums))
}

// Resolve ends the hold on name, a changed file that failed its checksum
// check, or whose upload the bucket refused as invalid (refusal.go). With
// keepLocal, the local bytes are the file's content as they
// are (the sums that failed are forgotten) and are uploaded as any
// change. Without, the bucket's version is taken: the local change is
// dropped from the cache, and its bytes are kept in lost+found under the
// cache directory; the path is returned. A file still open for writing
// cannot be resolved.
func (c *Cache) Resolve(ctx context.Context, name string, keepLocal bool) (saved string, err error) {
	c.mu.Lock()
	e := c.entries[name]
	switch {
	case e == nil || e.Rec.HeldWhy() == "":
		c.mu.Unlock()
		return "", fmt.Errorf("%s is not held (bucketfs status lists the held files)", name)
	case e.Writers > 0:
		c.mu.Unlock()
		return "", fmt.Errorf("%s is open for writing: close it first", name)
	}
	if keepLocal {
		if e.Rec.Damaged != "" {
			e.Rec.ForgetSums()
		}
		e.Rec.Damaged, e.Rec.Refused = "", ""
		e.Version++
		rec, seq := e.Snapshot()
		c.mu.Unlock()
		if err := c.persistEntry(e, rec, seq); err != nil {
			c.mu.Lock()
			e.Rec.Damaged = "kept local, not recorded: " + err.Error()
			c.mu.Unlock()
			return "", fmt.Errorf("recording the decision for %s: %w", name, err)
		}
		c.log.Info("a held file keeps its local bytes; it is uploaded", "object", name)
		c.mu.Lock()
		c.scheduleLocked(name, 0)
		c.mu.Unlock()
		return "", nil
	}
	id, version := e.Rec.ID, e.Version
	c.mu.Unlock()
	return c.verify.TakeBucket(ctx, verifyLedger{c, e}, name, id, version)
}

// CheckRead checks the chunks a read of n bytes at off from f, w's file,
// touches (write.Cache; verify.Read), unless w writes them itself.
func (w *writeLedger) CheckRead(f *os.File, off, n int64) error {
	c := w.c
	c.mu.Lock()
	e := w.e
	if w.orphan || n <= 0 || off >= e.Rec.Size || e.Rec.ChunkSize <= 0 {
		c.mu.Unlock()
		return nil
	}
	if e.Rec.Damaged != "" {
		err := verify.Damaged(e.Name, e.Rec.Damaged)
		c.mu.Unlock()
		return err
	}
	first, last := integrity.Touched(off, min(n, e.Rec.Size-off), e.Rec.ChunkSize)
	need := len(e.Rec.Sums) > 0
	c.mu.Unlock()
	if !need {
		return nil
	}
	return verify.Read(verifyLedger{c, e}, f, first, last)
}
