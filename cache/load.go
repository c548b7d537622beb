package cache

import (
	"fmt"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/entries"
	"github.com/bucketfs/bucketfs/cache/internal/recovery"
)

// ErrOtherBucket means the cache directory belongs to another bucket.
var ErrOtherBucket = durable.ErrOtherBucket

// StateError is a failure to open the index, the journal or the data
// files of a cache: it names the command that checks and repairs it.
type StateError struct {
	Dir string
	Err error
}

func (e *StateError) Error() string {
	return fmt.Sprintf("%v (check and repair the unmounted cache with: %s)", e.Err, recovery.FsckHint(e.Dir))
}

func (e *StateError) Unwrap() error { return e.Err }

// openState opens the index and the journal and loads them
// (recovery.Load: a damaged index is moved aside and rebuilt from the
// data files, records are reconciled with their files, files without a
// record are placed), then makes the entries of the records loaded,
// re-queues their changes and evicts to the cap.
func (c *Cache) openState() error {
	ld, err := recovery.Load(recovery.LoadOptions{
		Dir: c.opts.Dir, Bucket: c.b.Name(), ChunkSize: c.opts.ChunkSize, Desc: c.desc, Log: c.log,
	})
	if err != nil {
		return err
	}
	c.db, c.j = ld.DB, ld.Journal
	// Copies of the wrong size were cut to their records' and are
	// fetched again (checksum.go).
	c.stats.ChecksumMismatches += int64(ld.WrongSize)
	dirty := 0
	c.mu.Lock()
	for _, name := range ld.ByAccess() { // PushBack keeps the LRU order
		e := &entry{Entry: entries.New(name, ld.Records[name])}
		close(e.Ready)
		e.Elem = c.lru.PushBack(e)
		c.entries[name] = e
		c.chargeLocked(e, costOf(e.Rec))
		c.holdLocked(e)
		if e.Rec.Dirty {
			e.DirtySince = c.opened // left by the last run: waiting since the start, at least
			c.markLocalLocked(name)
			c.scheduleLocked(name, 0) // changes left by the last run go first
			dirty++
		}
	}
	c.mu.Unlock()
	c.budget.Refresh()
	c.mu.Lock()
	victims, _ := c.makeRoomLocked(0)
	c.mu.Unlock()
	c.removeAll(victims)
	c.warnPinnedOverCap()
	if dirty > 0 {
		c.log.Info("re-queued changes not uploaded by the last run", "files", dirty)
	}
	return nil
}
