package cache

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/integrity"
	"github.com/bucketfs/bucketfs/cache/internal/recovery"
	"github.com/bucketfs/bucketfs/transfer"
)

// Checksums of cached copies: the cache directory is not trusted blindly.
//
// Every chunk of a cached version has its CRC-32C in the version's record
// (record.Sums), computed as its bytes stream in from the bucket, or as an
// upload reads them. The record also keeps the object's own CRC-32C as
// the bucket reports it (record.CRC32C). What is checked, and when:
//   - a clean copy's file size, at start (load) and at every open;
//   - a clean copy's chunks, once per mount, before the copy is handed to
//     the kernel (FUSE passthrough, which the daemon never sees): a copy of
//     up to syncVerifyMax bytes at its first open, a larger one in the
//     background, while its handles read through the daemon and check each
//     chunk before they serve it;
//   - a whole download, against the object's checksum (transfer.Download);
//   - before an upload, the chunks of a changed file that the application
//     did not write (record.Written) against their sums; the upload then
//     carries the CRC-32C of what it sends, which the bucket checks.
//
// A bad chunk of a clean copy is dropped (no longer present), counted,
// logged, and fetched again; reads of it meanwhile go to the bucket. A bad
// chunk of a changed file is never uploaded and the file is never
// removed: it is held (record.Damaged), answers ErrDamaged (EIO), and is
// named by Status until an operator resolves it (Cache.Resolve).
//
// Chunks fetched or summed by this process are trusted for its lifetime
// (entry.checked): they were checked as they were written.
//
// Reading a file and comparing its chunks with their sums is package
// internal/integrity, which sees only the file and plain values; what a
// failure means for an entry (dropped chunks, a held file, the counts and
// the log lines) is decided here.

// ErrDamaged means a file with changes not yet in the bucket failed its
// checksum check: it is held, neither uploaded nor removed, until an
// operator keeps the local bytes or takes the bucket's version (Resolve).
var ErrDamaged = errors.New("the cached copy of a changed file failed its checksum check and is held")

// syncVerifyMax is the largest copy whose chunks are checked at open,
// before the open returns (about 10 ms of disk reading); a larger copy is
// checked in the background (Cache.syncVerifyMax; tests lower it).
const syncVerifyMax = 16 << 20

// cleanContentLocked reports whether e's file is (a copy of) a version in
// the bucket, which its sums describe and which can be fetched again.
func cleanContentLocked(e *entry) bool {
	return !e.rec.LocalContent() && !e.rec.Deleted && e.rec.Damaged == ""
}

// allCheckedLocked reports whether every chunk of e's copy was checked (or
// fetched) in this process, or cannot be: then it may be handed to the
// kernel.
func allCheckedLocked(e *entry) bool {
	if len(e.rec.Sums) == 0 || e.rec.Deleted {
		return true // nothing recorded to check against
	}
	for i := range e.rec.Chunks() {
		if _, ok := e.rec.ChunkSum(i); ok && !e.checkedLocked(i) {
			return false
		}
	}
	return true
}

func (e *entry) checkedLocked(i int) bool { return i < len(e.checked) && e.checked[i] }

func (e *entry) setCheckedLocked(i int, ok bool) {
	n := e.rec.Chunks()
	if len(e.checked) < n {
		e.checked = append(e.checked, make([]bool, n-len(e.checked))...)
	}
	if i < len(e.checked) {
		e.checked[i] = ok
	}
}

// checkChunks checks chunks [first, last] of e's copy (read through f,
// integrity.Check) that this process has not checked yet and that have
// sums: the chunks of a clean copy, and those a changed file did not
// write. A clean chunk that fails is dropped from the copy
// (dropBadChunks); a changed file with one is held (hold). It reports
// which of the chunks asked for may be served from the file; the others
// must be read from the bucket (a clean copy) or answer ErrDamaged (a
// held file).
func (c *Cache) checkChunks(e *entry, f *os.File, first, last int) []bool {
	c.mu.Lock()
	good := make([]bool, last-first+1)
	var todo []integrity.Want
	chunk, size, version := e.rec.ChunkSize, e.rec.Size, e.version
	clean := cleanContentLocked(e)
	for i := first; i <= last; i++ {
		sum, ok := e.rec.ChunkSum(i)
		switch {
		case e.checkedLocked(i):
			good[i-first] = true
		case !ok && clean:
			// Present without a sum (a copy from before sums were kept):
			// served as before. Not present (dropped as bad): from the
			// bucket.
			good[i-first] = e.rec.Complete || durable.BitSet(e.rec.Present, i)
		case !ok:
			// Written here (the file is the truth), or held already.
			good[i-first] = e.rec.Damaged == ""
		default:
			todo = append(todo, integrity.Want{I: i, Sum: sum})
		}
	}
	c.mu.Unlock()
	if len(todo) == 0 {
		return good
	}
	bad, why := integrity.Check(f, chunk, size, todo)
	for _, j := range todo {
		good[j.I-first] = true
	}
	for _, i := range bad {
		good[i-first] = false
	}
	c.mu.Lock()
	if e.version != version || cleanContentLocked(e) != clean {
		// Written meanwhile: what was read proves nothing about the file
		// now. A changed file is the truth (its upload checks it again);
		// a clean copy's bad chunks are read from the bucket.
		if !cleanContentLocked(e) && e.rec.Damaged == "" {
			for i := range good {
				good[i] = true
			}
		}
		c.mu.Unlock()
		return good
	}
	for _, j := range todo {
		if good[j.I-first] {
			e.setCheckedLocked(j.I, true)
		}
	}
	c.mu.Unlock()
	switch {
	case len(bad) == 0:
	case clean:
		c.dropBadChunks(e, bad, why)
	case !c.hold(e, e.name, bad, why):
		for _, i := range bad {
			good[i-first] = true // written meanwhile after all
		}
	}
	return good
}

// dropBadChunks takes chunks that failed their check out of e's clean
// copy: they are fetched again by the next download. Counted and logged.
func (c *Cache) dropBadChunks(e *entry, bad []int, why error) {
	c.mu.Lock()
	if !cleanContentLocked(e) || e.dl != nil {
		c.mu.Unlock()
		return
	}
	present := e.rec.PresentBools()
	for _, i := range bad {
		if i < len(present) {
			present[i] = false
		}
		e.setCheckedLocked(i, false)
	}
	e.rec.SetPresent(present)
	c.stats.ChecksumMismatches++
	err := fmt.Errorf("%w: %v", errBadCopy, why)
	c.noteErrorLocked("check", e.name, err)
	rec, seq := c.snapshotLocked(e)
	c.mu.Unlock()
	c.log.Warn("a cached copy failed its checksum check: the bad chunks are dropped and fetched again from the bucket",
		"object", e.name, "generation", rec.Generation, "chunks", len(bad), "err", why)
	if err := c.persistEntry(e, rec, seq); err != nil {
		c.log.Warn("recording dropped chunks failed", "object", e.name, "err", err)
	}
}

// errBadCopy labels a clean copy that failed a check (Status errors).
var errBadCopy = errors.New("cached copy damaged; fetched again")

// checkSize compares the size of e's clean, complete copy with its record
// and, if the file was cut short or grown behind the cache's back, drops
// the whole copy (it is fetched again). f is e's file.
func (c *Cache) checkSize(e *entry, f *os.File) {
	st, err := f.Stat()
	if err != nil {
		return
	}
	c.mu.Lock()
	if !cleanContentLocked(e) || !e.rec.Complete || e.dl != nil || st.Size() == e.rec.Size || e.writers > 0 {
		c.mu.Unlock()
		return
	}
	size := e.rec.Size
	bad := make([]int, e.rec.Chunks())
	for i := range bad {
		bad[i] = i
	}
	c.mu.Unlock()
	// Back to the size the record says, so that chunks land where they
	// belong; what it held is fetched again.
	if err := f.Truncate(size); err != nil {
		c.log.Warn("resizing a damaged cache file failed", "object", e.name, "err", err)
	}
	c.dropBadChunks(e, bad, fmt.Errorf("the cache file has %d bytes, its record says %d (the file is %s)", st.Size(), size, recovery.ShorterOrLonger(st.Size(), size)))
}

// verifyCopy checks e's clean, complete copy before a handle reads it
// (the size always, every chunk if it is small), so that a passthrough
// handle is given only checked bytes. A larger copy not yet checked is
// checked in the background, and the open waits for that up to
// verifyWait (at disk speed, about a GiB); it reports whether the check
// is still under way (the handle must then check what it reads itself).
func (c *Cache) verifyCopy(e *entry, f *os.File) (pending bool) {
	c.checkSize(e, f)
	c.mu.Lock()
	if !e.rec.Complete || e.dl != nil || allCheckedLocked(e) {
		c.mu.Unlock()
		return false
	}
	small, n := e.rec.Size <= c.syncVerifyMax, e.rec.Chunks()
	c.mu.Unlock()
	if small {
		c.checkChunks(e, f, 0, n-1)
		return false
	}
	select {
	case <-c.startVerify(e):
	case <-time.After(c.verifyWait):
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !allCheckedLocked(e) && e.rec.Complete
}

// verifyWait bounds how long an open waits for the background check of a
// large copy before it reads through the daemon, checking as it goes.
const verifyWait = time.Second

// startVerify checks every chunk of e's copy in the background, one copy
// at a time, holding a reference to e while it runs. The channel it
// returns is closed when the check ends.
func (c *Cache) startVerify(e *entry) <-chan struct{} {
	c.mu.Lock()
	if e.verifying != nil {
		defer c.mu.Unlock()
		return e.verifying
	}
	done := make(chan struct{})
	if e.dropped || c.closed {
		c.mu.Unlock()
		close(done)
		return done
	}
	e.verifying = done
	e.refs++
	id, n := e.rec.ID, e.rec.Chunks()
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			e.verifying = nil
			c.mu.Unlock()
			close(done)
			c.release(e)
		}()
		select {
		case c.verifySlot <- struct{}{}:
			defer func() { <-c.verifySlot }()
		case <-c.closing:
			return
		}
		f, err := os.Open(c.dataPath(id))
		if err != nil {
			return
		}
		defer f.Close()
		start := time.Now()
		for i := 0; i < n; i++ {
			select {
			case <-c.closing:
				return
			default:
			}
			c.checkChunks(e, f, i, i)
		}
		c.log.Debug("cached copy checked", "object", e.name, "chunks", n, "took", time.Since(start))
	}()
	return done
}

// checkBeforeWrite refuses a held file, and checks every chunk of a clean
// copy about to be changed (unless it is emptied first): a change must
// never be based on bytes the bucket's version does not have. Bad chunks
// are dropped, so that OpenWrite fetches them again.
func (c *Cache) checkBeforeWrite(e *entry, trunc bool) error {
	c.mu.Lock()
	if e.rec.Damaged != "" {
		err := fmt.Errorf("%s: %w: %s", e.name, ErrDamaged, e.rec.Damaged)
		c.mu.Unlock()
		return err
	}
	need := !trunc && cleanContentLocked(e) && e.rec.Complete && e.dl == nil && !allCheckedLocked(e)
	id, n := e.rec.ID, e.rec.Chunks()
	c.mu.Unlock()
	if !need {
		return nil
	}
	f, err := os.Open(c.dataPath(id))
	if err != nil {
		return fmt.Errorf("opening cache file: %w", err)
	}
	defer f.Close()
	c.checkSize(e, f)
	c.checkChunks(e, f, 0, n-1)
	return nil
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
		if !durable.BitSet(e.rec.Written, i) && 4*(i+1) <= len(e.rec.Sums) {
			still = true
		}
	}
	if !still || e.dropped {
		c.mu.Unlock()
		return false
	}
	e.rec.Damaged = why.Error()
	c.stats.ChecksumMismatches++
	c.noteErrorLocked("check", name, fmt.Errorf("%w: %v", ErrDamaged, why))
	rec, seq := c.snapshotLocked(e)
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
	if !body.OK || body.Chunk != e.rec.ChunkSize {
		e.rec.Sums, e.rec.Written, e.checked = nil, nil, nil
		return
	}
	e.rec.Sums = make([]byte, 4*len(body.Sums))
	for i, v := range body.Sums {
		binary.BigEndian.PutUint32(e.rec.Sums[4*i:], v)
	}
	e.rec.Written = nil
	e.rec.CRC32C = attrs.CRC32C
	e.checked = make([]bool, len(body.Sums))
	for i := range e.checked {
		e.checked[i] = true
	}
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
	case e == nil || e.rec.HeldWhy() == "":
		c.mu.Unlock()
		return "", fmt.Errorf("%s is not held (bucketfs status lists the held files)", name)
	case e.writers > 0:
		c.mu.Unlock()
		return "", fmt.Errorf("%s is open for writing: close it first", name)
	}
	if keepLocal {
		if e.rec.Damaged != "" {
			e.rec.ForgetSums()
		}
		e.rec.Damaged, e.rec.Refused = "", ""
		e.version++
		rec, seq := c.snapshotLocked(e)
		c.mu.Unlock()
		if err := c.persistEntry(e, rec, seq); err != nil {
			c.mu.Lock()
			e.rec.Damaged = "kept local, not recorded: " + err.Error()
			c.mu.Unlock()
			return "", fmt.Errorf("recording the decision for %s: %w", name, err)
		}
		c.log.Info("a held file keeps its local bytes; it is uploaded", "object", name)
		c.mu.Lock()
		c.scheduleLocked(name, 0)
		c.mu.Unlock()
		return "", nil
	}
	id, version := e.rec.ID, e.version
	c.mu.Unlock()
	saved, err = recovery.SaveLost(c.opts.Dir, name, id)
	if err != nil {
		return "", fmt.Errorf("keeping the local bytes of %s before dropping them: %w", name, err)
	}
	if testAfterSaveLost != nil {
		testAfterSaveLost(name)
	}
	c.mu.Lock()
	// Any change since (a write closed already, a deletion and a file
	// made again in the same entry, a new data file) is not in what was
	// kept: nothing is dropped then.
	if c.entries[name] != e || e.writers > 0 || e.version != version || e.rec.ID != id {
		c.mu.Unlock()
		return saved, fmt.Errorf("%s changed meanwhile; nothing dropped (its bytes are also in %s)", name, saved)
	}
	e.rec.Damaged, e.rec.Refused = "", ""
	e.cleanLocked()
	victims := c.dropLocked(e)
	c.notifyLocked()
	c.mu.Unlock()
	c.removeAll(victims)
	c.log.Warn("a held file takes the bucket's version; its local bytes are kept in lost+found", "object", name, "saved_as", saved)
	// What the name shows now is the bucket's.
	if a, err := c.b.Stat(ctx, name); err == nil {
		c.confirm(name, a, false)
	} else if errors.Is(err, transfer.ErrNotExist) {
		c.confirm(name, transfer.ObjectAttrs{}, true)
	}
	return saved, nil
}

// testAfterSaveLost, set by tests only, runs in Resolve once the local
// bytes are kept in lost+found, before the entry is dropped.
var testAfterSaveLost func(name string)

// CheckRead checks the chunks a read of n bytes at off from f, w's file,
// touches (write.Cache).
func (w *writeLedger) CheckRead(f *os.File, off, n int64) error {
	c := w.c
	c.mu.Lock()
	e := w.e
	if w.orphan || n <= 0 || off >= e.rec.Size || e.rec.ChunkSize <= 0 {
		c.mu.Unlock()
		return nil
	}
	if e.rec.Damaged != "" {
		err := fmt.Errorf("%s: %w: %s", e.name, ErrDamaged, e.rec.Damaged)
		c.mu.Unlock()
		return err
	}
	first, last := integrity.Touched(off, min(n, e.rec.Size-off), e.rec.ChunkSize)
	need := len(e.rec.Sums) > 0
	c.mu.Unlock()
	if !need {
		return nil
	}
	good := c.checkChunks(e, f, first, last)
	if !slices.Contains(good, false) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.rec.Damaged != "" {
		return fmt.Errorf("%s: %w: %s", e.name, ErrDamaged, e.rec.Damaged)
	}
	// A clean copy (OpenWrite checked it whole, so damage came since):
	// its bad chunks were dropped, and the file does not hold the bytes.
	return fmt.Errorf("%s: %w", e.name, errBadCopy)
}
