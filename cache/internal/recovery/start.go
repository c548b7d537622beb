package recovery

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	bolt "go.etcd.io/bbolt"
)

// bucketFile names, in the cache directory, the bucket the cache belongs
// to. index.db says it too; this file outlives a lost index, so that a
// rebuilt cache is never uploaded to another bucket.
const bucketFile = "bucket"

// CheckBucket refuses a cache directory that holds another bucket
// (durable.ErrOtherBucket), and notes the bucket if the directory does
// not say yet.
func CheckBucket(dir, bucket string) error {
	path := filepath.Join(dir, bucketFile)
	v, err := os.ReadFile(path)
	switch {
	case err == nil:
		if got := strings.TrimSpace(string(v)); got != bucket {
			return fmt.Errorf("cache dir holds bucket %q, not %q: %w", got, bucket, durable.ErrOtherBucket)
		}
		return nil
	case errors.Is(err, fs.ErrNotExist):
		if err := os.WriteFile(path, []byte(bucket+"\n"), 0o600); err != nil {
			return fmt.Errorf("cache dir %s is not writable: %w", dir, err)
		}
		return nil
	default:
		return fmt.Errorf("reading %s: %w", path, err)
	}
}

// OpenIndex opens index.db in dir; if it is damaged, it moves it aside
// and creates a new one. fresh is true if the index is new (missing, or
// replaced): its records are to be rebuilt from data/ (RebuildRecords).
func OpenIndex(dir, bucket string, log *slog.Logger) (db *bolt.DB, fresh bool, err error) {
	path := filepath.Join(dir, durable.IndexName)
	_, serr := os.Stat(path)
	missing := errors.Is(serr, fs.ErrNotExist)
	db, err = durable.OpenIndex(path, bucket)
	var ce *durable.CorruptError
	if !errors.As(err, &ce) {
		return db, missing, err
	}
	return ReplaceIndex(dir, bucket, ce, log)
}

// ReplaceIndex moves a damaged index aside (cause says why it is damaged)
// and opens a new one, fresh.
func ReplaceIndex(dir, bucket string, cause error, log *slog.Logger) (*bolt.DB, bool, error) {
	aside, err := durable.MoveAside(dir, "corrupt")
	if err != nil {
		return nil, false, fmt.Errorf("%v; %w", cause, err)
	}
	log.Error("the cache index was damaged: it was moved aside and a new one is rebuilt from the data files (changes not yet uploaded are kept)",
		"moved_to", aside, "err", cause, "check_with", FsckHint(dir))
	db, err := durable.OpenIndex(filepath.Join(dir, durable.IndexName), bucket)
	if err != nil {
		return nil, false, fmt.Errorf("creating a new cache index after moving the damaged one to %s: %w", aside, err)
	}
	return db, true, nil
}

// RebuildRecords puts the records data/'s files describe into db, a new
// index, and returns the plan and how many files there were. The
// journal is to be replayed on top of them after.
func RebuildRecords(db *bolt.DB, dataDir string, chunkSize int64) (Plan, int, error) {
	files, err := scanData(dataDir)
	if err != nil || len(files) == 0 {
		return Plan{}, 0, err
	}
	p := planOrphans(nil, files, chunkSize)
	err = db.Update(func(tx *bolt.Tx) error {
		for name, r := range p.Adopt {
			if err := durable.PutRecord(tx, name, &r); err != nil {
				return err
			}
		}
		return durable.ReserveIDs(tx, p.MaxID) // new IDs never name a file found
	})
	return p, len(files), err
}
