package cache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/recovery"
	bolt "go.etcd.io/bbolt"
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

// openState opens the index and the journal and loads them. A damaged
// index, found at open or while loading, is moved aside and rebuilt from
// the data files (once).
func (c *Cache) openState() error {
	dir := c.opts.Dir
	db, fresh, err := recovery.OpenIndex(dir, c.b.Name(), c.log)
	if err != nil {
		return err
	}
	for try := 0; ; try++ {
		err := c.openLoaded(db, fresh)
		var ce *durable.CorruptError
		if err == nil || !errors.As(err, &ce) || try > 0 {
			return err
		}
		if db, fresh, err = recovery.ReplaceIndex(dir, c.b.Name(), ce, c.log); err != nil {
			return err
		}
	}
}

// openLoaded rebuilds a fresh db's records from data/, replays the
// journal into db and loads it. On failure db is closed.
func (c *Cache) openLoaded(db *bolt.DB, fresh bool) error {
	fail := func(err error) error {
		_ = durable.Protect(db.Close)
		return err
	}
	if fresh {
		if err := c.rebuildRecords(db); err != nil {
			return fail(fmt.Errorf("rebuilding the cache index from %s: %w", c.dataDir, err))
		}
	}
	var j *durable.Journal
	var replayed int
	err := durable.Protect(func() error {
		var err error
		j, replayed, err = durable.OpenJournal(db, filepath.Join(c.opts.Dir, durable.JournalName))
		return err
	})
	if err != nil {
		return fail(err)
	}
	j.OnAppend(c.desc.Journaled)
	c.db, c.j = db, j
	if replayed > 0 {
		c.log.Info("applied the changes the last run left in the cache journal", "changes", replayed)
	}
	if err := c.load(); err != nil {
		j.Abandon()
		return fail(err)
	}
	return nil
}

// rebuildRecords puts into db, a new index, the records that data/'s
// files describe (the journal is replayed on top of them after).
func (c *Cache) rebuildRecords(db *bolt.DB) error {
	p, n, err := recovery.RebuildRecords(db, c.dataDir, c.opts.ChunkSize)
	if err != nil || n == 0 {
		return err
	}
	for _, name := range p.Trimmed {
		c.log.Warn("a changed file recovered from its description lost its custom metadata (too big to describe): it is uploaded without it", "object", name)
	}
	changed, deleted, other := p.CountAdopted()
	c.log.Warn("the cache index was missing or damaged: rebuilt it from the descriptions the data files carry",
		"data_files", n, "recovered_records", len(p.Adopt), "changed_files", changed, "deletions", deleted, "other_pending_changes", other,
		"files_to_drop", p.Drops(), "files_for_lost_found", p.ForLostFound())
	return nil
}

// load reads the index, reconciles it with data/ (files without a record
// are placed by their descriptions: recovery.Place), and evicts to the
// cap.
func (c *Cache) load() error {
	var recs map[string]record
	if err := durable.Protect(func() error {
		var err error
		recs, err = durable.LoadRecords(c.db)
		return err
	}); err != nil {
		var ce *durable.CorruptError
		if !errors.As(err, &ce) {
			err = &durable.CorruptError{Err: err} // a record that does not parse
		}
		return err
	}
	p, err := recovery.Place(recs, c.dataDir, c.opts.ChunkSize)
	if err != nil {
		return err
	}
	for name, r := range p.Adopt {
		recs[name] = r
	}
	for _, name := range p.Trimmed {
		c.log.Warn("a changed file recovered from its description lost its custom metadata (too big to describe): it is uploaded without it", "object", name)
	}
	c.j.AdvancePast(p.MaxID)
	if err := c.reconcile(recs, p.Adopt); err != nil {
		return err
	}
	lost := p.Settle(c.opts.Dir, c.log)
	if n := c.desc.Backfill(recs, p.Undescribed); n > 0 {
		c.log.Info("described cache files that carried no description yet", "files", n)
	}
	if n := len(p.Adopt); n > 0 {
		changed, deleted, other := p.CountAdopted()
		c.log.Warn("placed cache files that no index record named, from their own descriptions", "records", n,
			"changed_files", changed, "deletions", deleted, "other_pending_changes", other)
	}
	if lost > 0 {
		c.log.Error("cache files that could not be placed were moved to lost+found", "files", lost, "dir", filepath.Join(c.opts.Dir, recovery.LostFoundDir))
	}
	c.index(recs)
	return nil
}

// reconcile drops records without a file (logging lost changes), detaches
// deletions and sizes local copies from their files, and commits the
// adopted records and the drops.
func (c *Cache) reconcile(recs map[string]record, adopted map[string]record) error {
	var missing []string
	for name, r := range recs {
		st, err := os.Stat(c.dataPath(r.ID))
		if err != nil {
			if r.Dirty {
				c.log.Error("the cache file of a changed, not yet uploaded object is missing: its changes are lost", "object", name, "id", r.ID, "err", err)
			}
			missing = append(missing, name)
			continue
		}
		if r.Dirty && r.Deleted {
			// A deletion needs no bytes; its file may still share an
			// inode with a renamed file's new name if a crash came
			// before Rename detached it.
			if err := c.detachData(r.ID, name, r); err != nil {
				return fmt.Errorf("detaching the cache file of deleted %s: %w", name, err)
			}
			if st, err = os.Stat(c.dataPath(r.ID)); err != nil {
				return err
			}
		}
		switch {
		case r.LocalContent():
			// The file is the truth about local changes: writes land there
			// before the record is updated again.
			r.Size = st.Size()
			r.Complete, r.Present = true, nil
			recs[name] = r
		case !r.Deleted && st.Size() != r.Size:
			// A copy of a bucket version cut short (or grown) behind the
			// cache's back: none of it is trusted; it is fetched again
			// (checksum.go).
			c.log.Warn("a cached copy has the wrong size: it is dropped and fetched again from the bucket",
				"object", name, "generation", r.Generation, "file_size", st.Size(), "size", r.Size, "file_is", shorterOrLonger(st.Size(), r.Size))
			if err := os.Truncate(c.dataPath(r.ID), r.Size); err != nil {
				return fmt.Errorf("resizing the damaged cache file of %s: %w", name, err)
			}
			r.Complete, r.Present, r.Sums = false, nil, nil
			c.stats.ChecksumMismatches++
			recs[name] = r
		}
	}
	if len(missing) == 0 && len(adopted) == 0 {
		return nil
	}
	return c.j.Update(func(tx *bolt.Tx) error {
		for _, name := range missing {
			if err := durable.DeleteRecord(tx, name); err != nil {
				return err
			}
			delete(recs, name)
		}
		for name := range adopted {
			if r, ok := recs[name]; ok {
				if err := durable.PutRecord(tx, name, &r); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// index makes the entries of the loaded records, re-queues their changes
// and evicts to the cap.
func (c *Cache) index(recs map[string]record) {
	ordered := make([]*entry, 0, len(recs))
	for name, r := range recs {
		e := &entry{name: name, rec: r, ready: make(chan struct{})}
		if r.Dirty {
			e.dirtySince = c.opened // left by the last run: waiting since the start, at least
		}
		close(e.ready)
		ordered = append(ordered, e)
	}
	// Most recent first, so PushBack keeps the LRU order.
	sortByAccessDesc(ordered)
	c.mu.Lock()
	for _, e := range ordered {
		e.elem = c.lru.PushBack(e)
		c.entries[e.name] = e
		c.chargeLocked(e, costOf(e.rec))
	}
	dirty := 0
	for _, e := range ordered {
		c.holdLocked(e)
		if e.rec.Dirty {
			c.markLocalLocked(e.name)
			c.scheduleLocked(e.name, 0) // changes left by the last run go first
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
}
