package durable

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The bbolt schema (version 1):
//
//	meta/    "version" -> "1", "bucket" -> the bucket's name, "clean" ->
//	         present while no process has the index open (open.go)
//	objects/ object name -> JSON Record
//	staging/ staging prefix of a parallel upload -> JSON Staging
//	         (present from before its first part until its cleanup)
//
// Changes of objects/ go through the journal (journal.go) first; the
// bucket's sequence is the highest record ID handed out.
//
// Data files live in data/ and are named by record ID in hex (DataPath),
// never by object name, so that two versions of one name never share a
// file.
var (
	metaBucket    = []byte("meta")
	objectsBucket = []byte("objects")
	stagingBucket = []byte("staging")
	versionKey    = []byte("version")
	bucketKey     = []byte("bucket")
)

const schemaVersion = "1"

// IndexName and JournalName are the index's and the journal's file names
// in the cache directory.
const (
	IndexName   = "index.db"
	JournalName = "journal"
)

// DataPath is the path of data file id in dataDir.
func DataPath(dataDir string, id uint64) string {
	return filepath.Join(dataDir, strconv.FormatUint(id, 16))
}

// LoadRecords returns every record in db's objects bucket (the journal
// not applied: see Journal.Records).
func LoadRecords(db *bolt.DB) (map[string]Record, error) {
	out := map[string]Record{}
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(objectsBucket).ForEach(func(k, v []byte) error {
			var r Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("cache index entry %q: %w", k, err)
			}
			out[string(k)] = r
			return nil
		})
	})
	return out, err
}

// PutRecord stores r under name in tx, straight into bbolt: only inside
// Journal.Update (so that changes reach bbolt in the order they were made),
// or into a new index being rebuilt. r.ID comes from Journal.NewID.
func PutRecord(tx *bolt.Tx, name string, r *Record) error {
	b := tx.Bucket(objectsBucket)
	if r.ID == 0 {
		return fmt.Errorf("cache index: record of %q has no ID", name)
	}
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return b.Put([]byte(name), v)
}

// DeleteRecord removes name's record in tx, under the same rule as
// PutRecord.
func DeleteRecord(tx *bolt.Tx, name string) error {
	return tx.Bucket(objectsBucket).Delete([]byte(name))
}

// ReserveIDs makes the IDs handed out from tx's index on higher than id
// (a data file found on disk may be named by it).
func ReserveIDs(tx *bolt.Tx, id uint64) error {
	b := tx.Bucket(objectsBucket)
	if b.Sequence() < id {
		return b.SetSequence(id)
	}
	return nil
}

// recordID returns the file ID of name's record, if it has one.
func recordID(tx *bolt.Tx, name string) (uint64, bool) {
	v := tx.Bucket(objectsBucket).Get([]byte(name))
	if v == nil {
		return 0, false
	}
	var r Record
	if err := json.Unmarshal(v, &r); err != nil {
		return 0, true // unreadable: treat as some other version
	}
	return r.ID, true
}

// Staging is the index's note of a parallel upload's staging prefix.
type Staging struct {
	Object  string    `json:"object"`
	Started time.Time `json:"started"`
}

// PutStaging notes the staging prefix of an upload of object in db (a
// synced commit).
func PutStaging(db *bolt.DB, staging, object string) error {
	v, err := json.Marshal(Staging{Object: object, Started: time.Now().UTC()})
	if err != nil {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(stagingBucket).Put([]byte(staging), v)
	})
}

// DeleteStaging removes the note of a staging prefix (a synced commit).
func DeleteStaging(db *bolt.DB, staging string) error {
	return db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(stagingBucket).Delete([]byte(staging))
	})
}

// LoadStaging returns every staging prefix db notes. An unreadable note
// still names its prefix (with a zero Staging).
func LoadStaging(db *bolt.DB) (map[string]Staging, error) {
	out := map[string]Staging{}
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(stagingBucket).ForEach(func(k, v []byte) error {
			var r Staging
			_ = json.Unmarshal(v, &r)
			out[string(k)] = r
			return nil
		})
	})
	return out, err
}

// HasRecords reports whether the cache directory dir holds records of
// bucket, in its index or its journal. It only reads, and fails with
// ErrInUse if another process holds the index.
func HasRecords(dir, bucket string) (bool, error) {
	path := filepath.Join(dir, IndexName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	var has bool
	err := Protect(func() error {
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
		if errors.Is(err, bolt.ErrTimeout) {
			return fmt.Errorf("cache index %s is locked: %w", path, ErrInUse)
		}
		if err != nil {
			return err
		}
		defer db.Close()
		return db.View(func(tx *bolt.Tx) error {
			meta, objs := tx.Bucket(metaBucket), tx.Bucket(objectsBucket)
			if meta == nil || objs == nil || string(meta.Get(bucketKey)) != bucket {
				return nil
			}
			k, _ := objs.Cursor().First()
			// Changes not yet checkpointed are in the journal (journal.go).
			st, err := os.Stat(filepath.Join(dir, JournalName))
			has = k != nil || err == nil && st.Size() > 0
			return nil
		})
	})
	return has, err
}
