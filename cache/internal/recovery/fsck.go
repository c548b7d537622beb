package recovery

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
)

// Options configure Fsck.
type Options struct {
	// Rebuild moves index.db aside (index.db.old-TIME, or
	// index.db.corrupt-TIME if it is damaged) and builds a new one from
	// the data files' descriptions, with the journal replayed on top. The
	// next mount places the files left without a record (lost+found).
	Rebuild bool
}

// Report is what Fsck found (before a rebuild, if one was asked).
type Report struct {
	Dir          string
	IndexMissing bool
	IndexDamage  string // why index.db is unusable; empty if it is sound
	JournalOps   int    // changes in the journal, not yet in index.db

	Records        int // with the journal applied
	ChangedFiles   int // records with local content not yet uploaded
	Deletions      int // deletions not yet sent
	OtherPending   int // metadata changes, pending copies
	NoDescription  int // data files without a description (a lost index cannot place them)
	RecordsNoFile  []string
	FilesNoRecord  int
	WouldAdopt     []string // object names a start would take back from descriptions
	WouldRemove    int      // files without a record that hold nothing not in the bucket
	WouldLostFound []string // data files a start would move to lost+found

	// Checksums (sums.go): every cached copy checked against its
	// record's sums. BadCopies are copies of bucket versions that fail
	// (the next mount fetches their bad chunks again); Held are changed
	// files whose bytes not written here fail, or that are held already
	// (the next mount holds them: see bucketfs resolve). "name: why".
	CheckedCopies int
	BadCopies     []string
	Held          []string

	MovedAside string // where --rebuild moved index.db
	Rebuilt    int    // records the rebuilt index got from descriptions
}

// IndexPath is the cache index's path in the cache directory dir: the
// file whose lock (bbolt's flock) a process using the directory holds.
func IndexPath(dir string) string { return filepath.Join(dir, durable.IndexName) }

// InUse reports whether another process holds the cache directory dir:
// a mount, or fsck, holds its index's lock for as long as it uses it.
// It only tries the lock, and gives it back at once; a directory with no
// index is not in use.
func InUse(dir string) (bool, error) {
	f, err := os.Open(IndexPath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err // the lock goes with the file
}

// Fsck checks the cache in dir, which no process may be using: the
// index (all of it, bbolt's check included), the journal, and the data
// files against the records. With o.Rebuild it then replaces the index
// with one rebuilt from the data files.
func Fsck(dir string, o Options) (Report, error) {
	rep := Report{Dir: dir}
	dataDir := filepath.Join(dir, "data")
	if _, err := os.Stat(dataDir); err != nil {
		return rep, fmt.Errorf("%s is not a bucketfs cache dir: %w", dir, err)
	}
	path := filepath.Join(dir, "index.db")
	recs, err := fsckIndex(path, &rep)
	if err != nil {
		return rep, err
	}
	jops, err := fsckJournal(filepath.Join(dir, durable.JournalName))
	if err != nil {
		return rep, err
	}
	rep.JournalOps = len(jops)
	durable.Apply(recs, jops)
	if err := fsckFiles(dataDir, recs, &rep); err != nil {
		return rep, err
	}
	fsckSums(dataDir, recs, &rep)
	if !o.Rebuild {
		return rep, nil
	}
	return rep, fsckRebuild(dir, &rep)
}

// fsckIndex reads index.db read-only and checks all of it. A damaged or
// missing index is reported, not an error.
func fsckIndex(path string, rep *Report) (map[string]durable.Record, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		rep.IndexMissing = true
		return map[string]durable.Record{}, nil
	}
	recs, err := durable.CheckAndLoad(path)
	var ce *durable.CorruptError
	if errors.As(err, &ce) {
		rep.IndexDamage = ce.Error()
		return map[string]durable.Record{}, nil
	}
	return recs, err
}

func fsckJournal(path string) ([]durable.Op, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return durable.ReadJournal(f)
}

// fsckFiles compares data/ with recs.
func fsckFiles(dataDir string, recs map[string]durable.Record, rep *Report) error {
	files, err := scanData(dataDir)
	if err != nil {
		return err
	}
	onDisk := map[uint64]bool{}
	for _, f := range files {
		onDisk[f.id] = true
		if f.desc == nil && f.id != 0 {
			rep.NoDescription++
		}
	}
	named := map[uint64]bool{}
	haveFile := map[string]durable.Record{}
	for name, r := range recs {
		rep.Records++
		switch {
		case r.Dirty && r.Deleted:
			rep.Deletions++
		case r.LocalContent():
			rep.ChangedFiles++
		case r.Dirty:
			rep.OtherPending++
		}
		named[r.ID] = true
		if onDisk[r.ID] {
			haveFile[name] = r
		} else {
			rep.RecordsNoFile = append(rep.RecordsNoFile, name)
		}
	}
	for _, f := range files {
		if !named[f.id] {
			rep.FilesNoRecord++
		}
	}
	p := planOrphans(haveFile, files, 0)
	p.unseated()
	for name := range p.Adopt {
		rep.WouldAdopt = append(rep.WouldAdopt, name)
	}
	rep.WouldRemove = len(p.remove)
	for _, l := range p.lost {
		rep.WouldLostFound = append(rep.WouldLostFound, l.f.name+": "+l.reason)
	}
	sort.Strings(rep.RecordsNoFile)
	sort.Strings(rep.WouldAdopt)
	sort.Strings(rep.WouldLostFound)
	return nil
}

// fsckRebuild moves index.db aside and builds a new one from data/, with
// the journal replayed on top.
func fsckRebuild(dir string, rep *Report) error {
	if !rep.IndexMissing {
		// Hold the lock a mount takes (bbolt's flock) while the index is
		// replaced: a mount started since the check is refused, or refuses.
		f, err := os.Open(filepath.Join(dir, "index.db"))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			return durable.ErrInUse
		}
		kind := "old"
		if rep.IndexDamage != "" {
			kind = "corrupt"
		}
		aside, err := durable.MoveAside(dir, kind)
		if err != nil {
			return err
		}
		rep.MovedAside = aside
	}
	db, err := durable.OpenIndex(filepath.Join(dir, "index.db"), "")
	if err != nil {
		return fmt.Errorf("creating a new cache index: %w", err)
	}
	p, _, err := RebuildRecords(db, filepath.Join(dir, "data"), 0)
	if err == nil {
		var j *durable.Journal
		j, _, err = durable.OpenJournal(db, filepath.Join(dir, durable.JournalName), "") // makes no data file
		if err == nil {
			err = j.Close()
		}
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("rebuilding the cache index: %w", err)
	}
	rep.Rebuilt = len(p.Adopt)
	return nil
}
