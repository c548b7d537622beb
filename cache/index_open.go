package cache

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Opening index.db safely. A damaged bbolt file makes bbolt panic (slice
// bounds, assertions) or fault (SIGBUS on a page past the end of a
// truncated file, which it maps). So:
//   - everything that reads the file at open runs under protect, which
//     turns a panic or a memory fault into a corruptError;
//   - after an unclean stop (no clean marker in meta/, set by Close and
//     cleared at open), the whole file is checked: its size against its
//     pages, every key and record read, then bbolt's Tx.Check;
//   - a damaged index is moved aside (index.db.corrupt-TIME) and a new
//     one is rebuilt from the data files' descriptions (describe.go,
//     rebuild.go); the journal is replayed on top of it (it holds whole
//     records, newer than anything in the lost index).

var cleanKey = []byte("clean") // in meta/: the last run closed the index

// corruptError is damage found in index.db.
type corruptError struct{ err error }

func (e *corruptError) Error() string { return "the cache index is damaged: " + e.err.Error() }
func (e *corruptError) Unwrap() error { return e.err }

func corrupt(format string, a ...any) error { return &corruptError{fmt.Errorf(format, a...)} }

// protect runs fn and turns a panic, or a memory fault in a mapped file,
// into a corruptError. fn must only read or write index.db.
func protect(fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if p := recover(); p != nil {
			err = corrupt("reading it failed: %v", p)
		}
	}()
	return fn()
}

// openIndex opens (or creates) index.db and checks that it belongs to
// bucket (an empty bucket name: any, as fsck does). A damaged file is a
// *corruptError; nothing is moved here.
func openIndex(path, bucket string) (*bolt.DB, error) {
	var file *os.File
	opts := &bolt.Options{Timeout: time.Second, FreelistType: bolt.FreelistMapType,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			file = f
			return f, err
		}}
	var db *bolt.DB
	err := protect(func() error {
		var err error
		db, err = bolt.Open(path, 0o600, opts)
		switch {
		case errors.Is(err, bolt.ErrTimeout):
			return fmt.Errorf("cache index %s is locked: %w", path, ErrCacheInUse)
		case errors.Is(err, fs.ErrPermission):
			return fmt.Errorf("opening cache index %s: %w", path, err)
		case err != nil:
			return &corruptError{fmt.Errorf("opening %s: %w", path, err)}
		}
		if err := checkIndex(db, path, false); err != nil {
			return err
		}
		return initIndex(db, path, bucket)
	})
	if err != nil {
		if db != nil {
			_ = protect(db.Close)
		} else if file != nil {
			file.Close() // bbolt gave up half-way: its lock goes with the file
		}
		return nil, err
	}
	return db, nil
}

// checkIndex checks db after an unclean stop (or always, with full);
// after a clean one, only that the file is as long as its pages.
func checkIndex(db *bolt.DB, path string, full bool) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	return db.View(func(tx *bolt.Tx) error {
		if tx.Size() > st.Size() {
			return corrupt("%s is %d bytes long, shorter than its %d bytes of pages (truncated)", path, st.Size(), tx.Size())
		}
		if m := tx.Bucket(metaBucket); !full && m != nil && m.Get(cleanKey) != nil {
			return nil
		}
		if err := walkIndex(tx); err != nil {
			return err
		}
		var first error
		for err := range tx.Check() {
			if first == nil {
				first = err
			}
		}
		if first != nil {
			return corrupt("%s fails bbolt's check: %v", path, first)
		}
		return nil
	})
}

// walkIndex reads every key and value of tx (records decoded), so that
// a damaged page faults here, under protect, and not in bbolt's checker.
func walkIndex(tx *bolt.Tx) error {
	var walk func(name []byte, b *bolt.Bucket) error
	walk = func(name []byte, b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				if sub := b.Bucket(k); sub != nil {
					return walk(k, sub)
				}
				return nil
			}
			if string(name) == string(objectsBucket) {
				var r record
				if err := json.Unmarshal(v, &r); err != nil {
					return corrupt("record %q: %v", k, err)
				}
			}
			return nil
		})
	}
	return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(name, b) })
}

// initIndex makes the schema's buckets, checks version and bucket, and
// clears the clean marker (set again by a clean Close).
func initIndex(db *bolt.DB, path, bucket string) error {
	return db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(objectsBucket); err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(stagingBucket); err != nil {
			return err
		}
		if v := meta.Get(versionKey); v != nil && string(v) != schemaVersion {
			return fmt.Errorf("cache index %s has schema version %s; this bucketfs reads version %s", path, v, schemaVersion)
		}
		if b := meta.Get(bucketKey); b != nil && bucket != "" && string(b) != bucket {
			return fmt.Errorf("cache dir holds bucket %q, not %q: %w", b, bucket, ErrOtherBucket)
		}
		if err := meta.Delete(cleanKey); err != nil {
			return err
		}
		if err := meta.Put(versionKey, []byte(schemaVersion)); err != nil {
			return err
		}
		if bucket == "" {
			return nil
		}
		return meta.Put(bucketKey, []byte(bucket))
	})
}

// markClean sets the clean marker in tx (the last commit of Close).
func markClean(tx *bolt.Tx) error {
	return tx.Bucket(metaBucket).Put(cleanKey, []byte(time.Now().UTC().Format(time.RFC3339)))
}

// moveAside renames a damaged index.db in dir to index.db.corrupt-TIME
// and returns the new path.
func moveAside(dir, kind string) (string, error) {
	path := filepath.Join(dir, "index.db")
	aside := fmt.Sprintf("%s.%s-%s", path, kind, time.Now().UTC().Format("20060102T150405Z"))
	for n := 2; ; n++ {
		if _, err := os.Lstat(aside); errors.Is(err, fs.ErrNotExist) {
			break
		}
		aside = fmt.Sprintf("%s.%s-%s-%d", path, kind, time.Now().UTC().Format("20060102T150405Z"), n)
	}
	if err := os.Rename(path, aside); err != nil {
		return "", fmt.Errorf("moving the damaged cache index aside: %w", err)
	}
	return aside, nil
}

// openOrRebuildIndex opens index.db in dir; if it is damaged, it moves it
// aside and creates a new one. fresh is true if the index is new
// (missing, or replaced): its records are to be rebuilt from data/.
func openOrRebuildIndex(dir, bucket string, log *slog.Logger) (db *bolt.DB, fresh bool, err error) {
	path := filepath.Join(dir, "index.db")
	_, serr := os.Stat(path)
	missing := errors.Is(serr, fs.ErrNotExist)
	db, err = openIndex(path, bucket)
	var ce *corruptError
	if !errors.As(err, &ce) {
		return db, missing, err
	}
	return replaceIndex(dir, bucket, ce, log)
}

// replaceIndex moves a damaged index aside and opens a new one.
func replaceIndex(dir, bucket string, cause error, log *slog.Logger) (*bolt.DB, bool, error) {
	aside, err := moveAside(dir, "corrupt")
	if err != nil {
		return nil, false, fmt.Errorf("%v; %w", cause, err)
	}
	log.Error("the cache index was damaged: it was moved aside and a new one is rebuilt from the data files (changes not yet uploaded are kept)",
		"moved_to", aside, "err", cause, "check_with", fsckHint(dir))
	db, err := openIndex(filepath.Join(dir, "index.db"), bucket)
	if err != nil {
		return nil, false, fmt.Errorf("creating a new cache index after moving the damaged one to %s: %w", aside, err)
	}
	return db, true, nil
}
