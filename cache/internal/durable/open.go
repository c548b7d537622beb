package durable

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Opening index.db safely. A damaged bbolt file makes bbolt panic (slice
// bounds, assertions) or fault (SIGBUS on a page past the end of a
// truncated file, which it maps). So:
//   - everything that reads the file at open runs under Protect, which
//     turns a panic or a memory fault into a CorruptError;
//   - after an unclean stop (no clean marker in meta/, set by Close and
//     cleared at open), the whole file is checked: its size against its
//     pages, every key and record read, then bbolt's Tx.Check;
//   - a damaged index is moved aside (index.db.corrupt-TIME) and a new
//     one is rebuilt from the data files' descriptions (describe.go,
//     cache/internal/recovery); the journal is replayed on top of it (it
//     holds whole records, newer than anything in the lost index). Moving
//     aside and rebuilding are package recovery's, at a start (called by
//     cache/load.go) and in fsck.

var cleanKey = []byte("clean") // in meta/: the last run closed the index

// ErrInUse means a running bucketfs holds the cache directory.
var ErrInUse = errors.New("another bucketfs process uses this cache dir (unmount it first)")

// ErrOtherBucket means the cache directory belongs to another bucket.
var ErrOtherBucket = errors.New("use one cache dir per bucket")

// CorruptError is damage found in index.db.
type CorruptError struct{ Err error }

func (e *CorruptError) Error() string { return "the cache index is damaged: " + e.Err.Error() }

// Unwrap returns the damage.
func (e *CorruptError) Unwrap() error { return e.Err }

func corrupt(format string, a ...any) error { return &CorruptError{fmt.Errorf(format, a...)} }

// Protect runs fn and turns a panic, or a memory fault in a mapped file,
// into a *CorruptError. fn must only read or write index.db.
func Protect(fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if p := recover(); p != nil {
			err = corrupt("reading it failed: %v", p)
		}
	}()
	return fn()
}

// OpenIndex opens (or creates) index.db at path and checks that it
// belongs to bucket (an empty bucket name: any, as fsck does). After an
// unclean stop all of it is checked. A damaged file is a *CorruptError;
// nothing is moved here. A file another process holds is ErrInUse.
func OpenIndex(path, bucket string) (*bolt.DB, error) {
	var file *os.File
	opts := &bolt.Options{Timeout: time.Second, FreelistType: bolt.FreelistMapType,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			file = f
			return f, err
		}}
	var db *bolt.DB
	err := Protect(func() error {
		var err error
		db, err = bolt.Open(path, 0o600, opts)
		switch {
		case errors.Is(err, bolt.ErrTimeout):
			return fmt.Errorf("cache index %s is locked: %w", path, ErrInUse)
		case errors.Is(err, fs.ErrPermission):
			return fmt.Errorf("opening cache index %s: %w", path, err)
		case err != nil:
			return &CorruptError{fmt.Errorf("opening %s: %w", path, err)}
		}
		if err := checkIndex(db, path, false); err != nil {
			return err
		}
		return initIndex(db, path, bucket)
	})
	if err != nil {
		if db != nil {
			_ = Protect(db.Close)
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
// a damaged page faults here, under Protect, and not in bbolt's checker.
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
				var r Record
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

// MarkClean sets the clean marker in tx (the last commit of a clean
// close: the next open skips the full check).
func MarkClean(tx *bolt.Tx) error {
	return tx.Bucket(metaBucket).Put(cleanKey, []byte(time.Now().UTC().Format(time.RFC3339)))
}

// MoveAside renames index.db in dir to index.db.KIND-TIME (kind
// "corrupt" for a damaged one, "old" for one fsck replaces) and returns
// the new path.
func MoveAside(dir, kind string) (string, error) {
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

// CheckAndLoad opens the index at path read-only, checks all of it
// (bbolt's check included) and returns its records (the journal not
// applied). Damage is a *CorruptError; a file another process holds is
// ErrInUse.
func CheckAndLoad(path string) (map[string]Record, error) {
	recs := map[string]Record{}
	var db *bolt.DB
	err := Protect(func() error {
		var err error
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
		switch {
		case errors.Is(err, bolt.ErrTimeout):
			return ErrInUse
		case errors.Is(err, fs.ErrPermission):
			return err
		case err != nil:
			return &CorruptError{err}
		}
		if err := checkIndex(db, path, true); err != nil {
			return err
		}
		return db.View(func(tx *bolt.Tx) error {
			if tx.Bucket(objectsBucket) == nil {
				return nil
			}
			var err error
			recs, err = LoadRecords(db)
			return err
		})
	})
	if db != nil {
		_ = Protect(db.Close)
	}
	return recs, err
}
