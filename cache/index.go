package cache

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The bbolt schema (version 1):
//
//	meta/    "version" -> "1", "bucket" -> the bucket's name, "clean" ->
//	         present while no process has the index open (index_open.go)
//	objects/ object name -> JSON record
//	staging/ staging prefix of a parallel upload -> JSON stagingRecord
//	         (present from before its first part until its cleanup)
//
// Changes of objects/ go through the journal (journal.go) first; the
// bucket's sequence is the highest record ID handed out.
//
// Data files live in data/ and are named by record ID in hex, never by
// object name, so that two versions of one name never share a file.
var (
	metaBucket    = []byte("meta")
	objectsBucket = []byte("objects")
	stagingBucket = []byte("staging")
	versionKey    = []byte("version")
	bucketKey     = []byte("bucket")
)

const schemaVersion = "1"

// record is the persisted state of one cached object version.
type record struct {
	ID         uint64 `json:"id"`         // names the data file; unique forever
	Generation int64  `json:"generation"` // the object version the file holds
	Size       int64  `json:"size"`
	ChunkSize  int64  `json:"chunk_size"`        // unit of Present
	Complete   bool   `json:"complete"`          // every byte is in the file, synced
	Present    []byte `json:"present,omitempty"` // chunk bitmap while incomplete; bit set only for synced chunks
	LastAccess int64  `json:"last_access"`       // unix nanoseconds; persisted lazily
	// Dirty: the file holds local changes not yet in the bucket, based on
	// Generation (0: the object did not exist). Set durably before the
	// first change is written; cleared only after the upload of the
	// version that was uploaded, with nothing changed since.
	Dirty bool `json:"dirty,omitempty"`
	// Deleted (with Dirty): the object is to be deleted from the bucket,
	// if its live generation is still Generation (< 0: whatever it is).
	Deleted bool `json:"deleted,omitempty"`
	// Attempts are the IDs of uploads of this name that were sent and not
	// confirmed (the process may have died before the answer came). Each
	// upload carries its ID in the object's metadata (AttemptKey), so that
	// an object found in the bucket can be recognised as this cache's own.
	// Cleared when an upload is confirmed.
	Attempts []string `json:"attempts,omitempty"`
	// SavingAs (with Dirty) names the conflict copy the local version is
	// being saved as (conflictcopy.go), sent with one of Attempts: a try
	// whose answer was lost is found there and not made twice. Cleared
	// once a copy is confirmed.
	SavingAs string `json:"saving_as,omitempty"`
	// Meta is the custom metadata the local version carries to the
	// bucket (see meta.go); nil: none set here.
	Meta map[string]string `json:"meta,omitempty"`
	// MetaOnly (with Dirty): only Meta changed; the content is the
	// bucket's Generation, so the upload is a metadata patch and the
	// file may be incomplete.
	MetaOnly bool `json:"meta_only,omitempty"`
	// CopyFrom and CopyGen (with Dirty, not Deleted): the content is
	// generation CopyGen of object CopyFrom in the bucket (a directory
	// rename, rename.go). The upload is a server-side copy of it, and an
	// incomplete file is filled from it; until the copy is made, CopyFrom
	// is held (no change of that name is sent), so the version stays.
	CopyFrom string `json:"copy_from,omitempty"`
	CopyGen  int64  `json:"copy_gen,omitempty"`
	// CopyType is the source's content type: a copy that sets custom
	// metadata sets the whole object resource, so it is given again.
	CopyType string `json:"copy_type,omitempty"`

	// Integrity (checksum.go). Sums holds the CRC-32C of each chunk (4
	// bytes big-endian a chunk) of the version the file was filled
	// with, valid for present chunks not Written. CRC32C is that
	// version's checksum as the bucket gave it (0: unknown). Written
	// (with Dirty) marks the chunks changed here since, set before their
	// bytes change. Damaged (with Dirty) says why the file is held: a
	// chunk not written here failed its check.
	// Encoding is the version's Content-Encoding: the file holds its
	// stored bytes (gzip: not decoded), and an upload keeps it.
	Encoding string `json:"encoding,omitempty"`
	Sums     []byte `json:"sums,omitempty"`
	CRC32C   uint32 `json:"crc32c,omitempty"`
	Written  []byte `json:"written,omitempty"`
	Damaged  string `json:"damaged,omitempty"`
	// Refused (with Dirty) says why the file is held because the bucket
	// refused its upload in a way that will not change (refusal.go).
	Refused string `json:"refused,omitempty"`
	// Pinned keeps the copy from eviction until it is unpinned (warm.go).
	Pinned bool `json:"pinned,omitempty"`
}

func (r *record) chunks() int {
	if r.ChunkSize <= 0 {
		return 0
	}
	return int((r.Size + r.ChunkSize - 1) / r.ChunkSize)
}

func (r *record) presentBools() []bool {
	p := make([]bool, r.chunks())
	for i := range p {
		p[i] = r.Complete || (i/8 < len(r.Present) && r.Present[i/8]&(1<<(i%8)) != 0)
	}
	return p
}

func (r *record) setPresent(p []bool) {
	done := true
	bits := make([]byte, (len(p)+7)/8)
	for i, ok := range p {
		if ok {
			bits[i/8] |= 1 << (i % 8)
		} else {
			done = false
		}
	}
	r.Complete = done
	if done {
		r.Present = nil
	} else {
		r.Present = bits
	}
}

func loadRecords(db *bolt.DB) (map[string]record, error) {
	out := map[string]record{}
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(objectsBucket).ForEach(func(k, v []byte) error {
			var r record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("cache index entry %q: %w", k, err)
			}
			out[string(k)] = r
			return nil
		})
	})
	return out, err
}

// putRecord stores r under name. r.ID comes from journal.newID.
func putRecord(tx *bolt.Tx, name string, r *record) error {
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

// recordID returns the file ID of name's record, if it has one.
func recordID(tx *bolt.Tx, name string) (uint64, bool) {
	v := tx.Bucket(objectsBucket).Get([]byte(name))
	if v == nil {
		return 0, false
	}
	var r record
	if err := json.Unmarshal(v, &r); err != nil {
		return 0, true // unreadable: treat as some other version
	}
	return r.ID, true
}
