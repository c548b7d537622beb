package recovery

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	bolt "go.etcd.io/bbolt"
)

// Loading the index at a start: the index and the journal opened (a
// damaged index moved aside and rebuilt from the data files), the journal
// replayed, the records read and mended against data/ (reconcile), and
// the files no record names placed (Place, Plan.Settle). What comes out
// is plain: the records, each with its data file, for the cache to make
// its entries of.

// LoadOptions say which cache directory Load loads, and with what.
type LoadOptions struct {
	Dir       string // the cache directory
	Bucket    string // the bucket the cache belongs to (index.db must say it)
	ChunkSize int64  // of the records made from the data files' descriptions
	// Desc describes the data files of Dir's data/: the journal Load
	// opens writes through it (Journal.OnAppend), and it describes the
	// files found without a description, and the deletions detached.
	Desc *durable.Describer
	Log  *slog.Logger
}

// Loaded is what Load leaves the cache: the index and its journal, open
// and the caller's from then on, and the records, each with its data
// file.
type Loaded struct {
	DB      *bolt.DB
	Journal *durable.Journal
	Records map[string]durable.Record
	// WrongSize is how many clean copies had the wrong size: each was
	// cut or grown to its record's size and marked incomplete, to be
	// fetched again (a checksum mismatch, for the cache's counters).
	WrongSize int
}

// ByAccess returns the names of the records loaded, most recently used
// first (Record.LastAccess, as last written): the order the cache's LRU
// list had.
func (ld Loaded) ByAccess() []string {
	names := slices.Collect(maps.Keys(ld.Records))
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Compare(ld.Records[b].LastAccess, ld.Records[a].LastAccess)
	})
	return names
}

// loader is one Load: its options, and the index and journal of the try
// under way.
type loader struct {
	LoadOptions
	dataDir   string
	db        *bolt.DB
	j         *durable.Journal
	wrongSize int // over every try
}

// Load opens the index and the journal of o.Dir and loads them. A
// damaged index, found at open or while loading, is moved aside and
// rebuilt from the data files (once). On failure nothing is left open.
func Load(o LoadOptions) (Loaded, error) {
	l := &loader{LoadOptions: o, dataDir: filepath.Join(o.Dir, "data")}
	db, fresh, err := OpenIndex(o.Dir, o.Bucket, o.Log)
	if err != nil {
		return Loaded{}, err
	}
	for try := 0; ; try++ {
		recs, err := l.openLoaded(db, fresh)
		if err == nil {
			return Loaded{DB: l.db, Journal: l.j, Records: recs, WrongSize: l.wrongSize}, nil
		}
		var ce *durable.CorruptError
		if !errors.As(err, &ce) || try > 0 {
			return Loaded{}, err
		}
		if db, fresh, err = ReplaceIndex(o.Dir, o.Bucket, ce, o.Log); err != nil {
			return Loaded{}, err
		}
	}
}

// openLoaded rebuilds a fresh db's records from data/, replays the
// journal into db and loads it. On failure db is closed.
func (l *loader) openLoaded(db *bolt.DB, fresh bool) (map[string]durable.Record, error) {
	fail := func(err error) (map[string]durable.Record, error) {
		_ = durable.Protect(db.Close)
		return nil, err
	}
	if fresh {
		if err := l.rebuildRecords(db); err != nil {
			return fail(fmt.Errorf("rebuilding the cache index from %s: %w", l.dataDir, err))
		}
	}
	var j *durable.Journal
	var replayed int
	err := durable.Protect(func() error {
		var err error
		j, replayed, err = durable.OpenJournal(db, filepath.Join(l.Dir, durable.JournalName), l.dataDir)
		return err
	})
	if err != nil {
		return fail(err)
	}
	j.OnAppend(l.Desc.Journaled)
	l.db, l.j = db, j
	if replayed > 0 {
		l.Log.Info("applied the changes the last run left in the cache journal", "changes", replayed)
	}
	recs, err := l.load()
	if err != nil {
		j.Abandon()
		return fail(err)
	}
	return recs, nil
}

// rebuildRecords puts into db, a new index, the records that data/'s
// files describe (the journal is replayed on top of them after).
func (l *loader) rebuildRecords(db *bolt.DB) error {
	p, n, err := RebuildRecords(db, l.dataDir, l.ChunkSize)
	if err != nil || n == 0 {
		return err
	}
	for _, name := range p.Trimmed {
		l.Log.Warn("a changed file recovered from its description lost its custom metadata (too big to describe): it is uploaded without it", "object", name)
	}
	changed, deleted, other := p.CountAdopted()
	l.Log.Warn("the cache index was missing or damaged: rebuilt it from the descriptions the data files carry",
		"data_files", n, "recovered_records", len(p.Adopt), "changed_files", changed, "deletions", deleted, "other_pending_changes", other,
		"files_to_drop", p.Drops(), "files_for_lost_found", p.ForLostFound())
	return nil
}

// load reads the index, reconciles it with data/ (files without a record
// are placed by their descriptions: Place), and returns its records.
func (l *loader) load() (map[string]durable.Record, error) {
	var recs map[string]durable.Record
	if err := durable.Protect(func() error {
		var err error
		recs, err = durable.LoadRecords(l.db)
		return err
	}); err != nil {
		var ce *durable.CorruptError
		if !errors.As(err, &ce) {
			err = &durable.CorruptError{Err: err} // a record that does not parse
		}
		return nil, err
	}
	p, err := Place(recs, l.dataDir, l.ChunkSize)
	if err != nil {
		return nil, err
	}
	for name, r := range p.Adopt {
		recs[name] = r
	}
	for _, name := range p.Trimmed {
		l.Log.Warn("a changed file recovered from its description lost its custom metadata (too big to describe): it is uploaded without it", "object", name)
	}
	l.j.AdvancePast(p.MaxID)
	if err := l.reconcile(recs, p.Adopt); err != nil {
		return nil, err
	}
	lost := p.Settle(l.Dir, l.Log)
	if n := l.Desc.Backfill(recs, p.Undescribed); n > 0 {
		l.Log.Info("described cache files that carried no description yet", "files", n)
	}
	if n := len(p.Adopt); n > 0 {
		changed, deleted, other := p.CountAdopted()
		l.Log.Warn("placed cache files that no index record named, from their own descriptions", "records", n,
			"changed_files", changed, "deletions", deleted, "other_pending_changes", other)
	}
	if lost > 0 {
		l.Log.Error("cache files that could not be placed were moved to lost+found", "files", lost, "dir", filepath.Join(l.Dir, LostFoundDir))
	}
	return recs, nil
}

// reconcile drops records without a file (logging lost changes), detaches
// deletions and sizes local copies from their files, and commits the
// adopted records and the drops.
func (l *loader) reconcile(recs map[string]durable.Record, adopted map[string]durable.Record) error {
	var missing []string
	for name, r := range recs {
		path := durable.DataPath(l.dataDir, r.ID)
		st, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) && r.Dirty && (r.Deleted || !r.LocalContent()) {
			// A change that needs no bytes of its own: a deletion, a
			// pending copy (its content is a version in the bucket) or a
			// metadata change. Its file is made again, rather than the
			// change dropped: a dropped pending copy would free the hold
			// on its source, whose deletion (the other half of a rename)
			// would then go, and the file would be in neither place. A
			// power loss can leave such a record without its file if
			// the journal was applied (bbolt's sync) before the data
			// directory was synced by the cache that made the file
			// (caches from before the journal synced it first,
			// durable.Journal.MadeFile), or if the file was removed.
			if r, err = l.remake(name, r); err == nil {
				recs[name] = r
				st, err = os.Stat(path)
			}
		}
		if err != nil {
			if r.Dirty {
				l.Log.Error("the cache file of a changed, not yet uploaded object is missing: its changes are lost", "object", name, "id", r.ID, "err", err)
			}
			missing = append(missing, name)
			continue
		}
		if r.Dirty && r.Deleted {
			// A deletion needs no bytes; its file may still share an
			// inode with a renamed file's new name if a crash came
			// before Rename detached it. The deletion is in the index,
			// so its file may be detached (Describer.Detach).
			if err := l.Desc.Detach(r.ID, durable.Describe(name, r)); err != nil {
				return fmt.Errorf("detaching the cache file of deleted %s: %w", name, err)
			}
			if st, err = os.Stat(path); err != nil {
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
			// cache's back: none of it is trusted; it is fetched again.
			l.Log.Warn("a cached copy has the wrong size: it is dropped and fetched again from the bucket",
				"object", name, "generation", r.Generation, "file_size", st.Size(), "size", r.Size, "file_is", ShorterOrLonger(st.Size(), r.Size))
			if err := os.Truncate(path, r.Size); err != nil {
				return fmt.Errorf("resizing the damaged cache file of %s: %w", name, err)
			}
			r.Complete, r.Present, r.Sums = false, nil, nil
			l.wrongSize++
			recs[name] = r
		}
	}
	if len(missing) == 0 && len(adopted) == 0 {
		return nil
	}
	return l.j.Update(func(tx *bolt.Tx) error {
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

// remake makes the missing data file of r, a change of name that needs
// no bytes of its own, again: empty and described (Describer.Detach);
// for a pending copy or a metadata change, as long as the version it
// copies, none of it present (the reads fetch it). It returns the record
// as it now is.
func (l *loader) remake(name string, r durable.Record) (durable.Record, error) {
	if err := l.Desc.Detach(r.ID, durable.Describe(name, r)); err != nil {
		return r, fmt.Errorf("making again the missing cache file of %s: %w", name, err)
	}
	l.j.MadeFile() // its name durable at the next sync or checkpoint
	if !r.Deleted {
		if err := os.Truncate(durable.DataPath(l.dataDir, r.ID), r.Size); err != nil {
			return r, fmt.Errorf("sizing the remade cache file of %s: %w", name, err)
		}
		r.Complete, r.Present, r.Sums = false, nil, nil
	}
	l.Log.Warn("the cache file of a pending change that needs no bytes of its own (a deletion, a copy, a metadata change) was missing: made again, the change kept",
		"object", name, "id", r.ID, "deletion", r.Deleted, "copy_of", r.CopyFrom)
	return r, nil
}
