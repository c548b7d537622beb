package durable

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/bucketfs/bucketfs/internal/crc32c"
)

// Record is the persisted state of one cached object version: the value
// of its name in the objects bucket, and of a put in the journal.
type Record struct {
	ID         uint64 `json:"id"`         // names the data file; unique forever
	Generation int64  `json:"generation"` // the object version the file holds
	Size       int64  `json:"size"`
	ChunkSize  int64  `json:"chunk_size"`        // unit of Present
	Complete   bool   `json:"complete"`          // every byte is in the file, synced
	Present    []byte `json:"present,omitempty"` // chunk bitmap while incomplete; bit set only for synced Chunks
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
	// being saved as (cache/internal/upload/conflict.go), sent with one
	// of Attempts: a try whose answer was lost is found there and not
	// made twice. Cleared once a copy is confirmed.
	SavingAs string `json:"saving_as,omitempty"`
	// Meta is the custom metadata the local version carries to the
	// bucket (see cache/meta.go); nil: none set here.
	Meta map[string]string `json:"meta,omitempty"`
	// MetaOnly (with Dirty): only Meta changed; the content is the
	// bucket's Generation, so the upload is a metadata patch and the
	// file may be incomplete.
	MetaOnly bool `json:"meta_only,omitempty"`
	// CopyFrom and CopyGen (with Dirty, not Deleted): the content is
	// generation CopyGen of object CopyFrom in the bucket (a directory
	// rename, cache/rename.go). The upload is a server-side copy of it, and an
	// incomplete file is filled from it; until the copy is made, CopyFrom
	// is held (no change of that name is sent), so the version stays.
	CopyFrom string `json:"copy_from,omitempty"`
	CopyGen  int64  `json:"copy_gen,omitempty"`
	// CopyType is the source's content type: a copy that sets custom
	// metadata sets the whole object resource, so it is given again.
	CopyType string `json:"copy_type,omitempty"`

	// Integrity (cache/checksum.go). Sums holds the CRC-32C of each chunk (4
	// bytes big-endian a chunk) of the version the file was filled
	// with, valid for present Chunks not Written. CRC32C is that
	// version's checksum as the bucket gave it (0: unknown). Written
	// (with Dirty) marks the Chunks changed here since, set before their
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
	// refused its upload in a way that will not change (cache/refusal.go).
	Refused string `json:"refused,omitempty"`
	// Pinned keeps the copy from eviction until it is unpinned (cache/warm.go).
	Pinned bool `json:"pinned,omitempty"`
}

// Chunks is the number of chunks of ChunkSize bytes the version has.
func (r *Record) Chunks() int {
	if r.ChunkSize <= 0 {
		return 0
	}
	return int((r.Size + r.ChunkSize - 1) / r.ChunkSize)
}

// PresentBools returns, for each chunk, whether the file holds it.
func (r *Record) PresentBools() []bool {
	p := make([]bool, r.Chunks())
	for i := range p {
		p[i] = r.Complete || (i/8 < len(r.Present) && r.Present[i/8]&(1<<(i%8)) != 0)
	}
	return p
}

// SetPresent records which chunks the file holds (a chunk is set only
// once its bytes were synced), and Complete if it holds them all.
func (r *Record) SetPresent(p []bool) {
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

// ChunkSum returns the recorded CRC-32C of chunk i, if the record has one
// that still describes the file: the chunk is present (or the copy
// complete) and was not written here since the sums were taken.
func (r *Record) ChunkSum(i int) (uint32, bool) {
	if i < 0 || 4*(i+1) > len(r.Sums) || BitSet(r.Written, i) {
		return 0, false
	}
	if !r.Complete && !BitSet(r.Present, i) {
		return 0, false
	}
	return binary.BigEndian.Uint32(r.Sums[4*i:]), true
}

// ChunkSpan returns the offset and length of chunk i of a size-byte file.
func ChunkSpan(i int, chunk, size int64) (int64, int64) {
	off := int64(i) * chunk
	return off, max(min(chunk, size-off), 0)
}

// ReadChunkSum returns the CRC-32C of n bytes of f at off: what a chunk
// sum of the record says of the data file (ChunkSum), read again.
func ReadChunkSum(f *os.File, buf []byte, off, n int64) (uint32, error) {
	var sum uint32
	for done := int64(0); done < n; {
		m, err := f.ReadAt(buf[:min(int64(len(buf)), n-done)], off+done)
		sum = crc32c.Update(sum, buf[:m])
		done += int64(m)
		if err == io.EOF && done < n {
			return 0, fmt.Errorf("the cache file ends at %d, inside chunk at %d (%d bytes)", off+done, off, n)
		}
		if err != nil && err != io.EOF {
			return 0, err
		}
	}
	return sum, nil
}

// SetSums records the checksums of the chunks whose sum is known. A
// present chunk without one (a copy from before sums were kept) leaves
// the copy without sums: a sum of 0 would be taken for a real one.
func (r *Record) SetSums(present, known []bool, sums []uint32) {
	for i := range present {
		if present[i] && !known[i] {
			r.Sums = nil
			return
		}
	}
	n := r.Chunks()
	// A new slice: snapshots of the record (being written to the journal
	// without the lock) share the old one.
	old := r.Sums
	r.Sums = make([]byte, 4*n)
	copy(r.Sums, old)
	for i := 0; i < n && i < len(known); i++ {
		if known[i] {
			binary.BigEndian.PutUint32(r.Sums[4*i:], sums[i])
		}
	}
}

// MarkWritten records that the bytes [from, to) change here: the sums of
// their chunks no longer describe the file. It reports whether the record
// changed (it must then be persisted before the bytes change). A record
// without sums has nothing to protect.
func (r *Record) MarkWritten(from, to int64) bool {
	n := len(r.Sums) / 4
	if n == 0 || to <= from || r.ChunkSize <= 0 {
		return false
	}
	first := int(from / r.ChunkSize)
	last := min(int((to-1)/r.ChunkSize), n-1)
	changed := false
	for i := first; i <= last; i++ {
		if !BitSet(r.Written, i) {
			if !changed {
				// A new slice: snapshots of the record share the old one.
				r.Written = slices.Clone(r.Written)
			}
			r.Written = setBit(r.Written, i)
			changed = true
		}
	}
	return changed
}

// AllSums returns the sums of every present chunk, or nil if one of them
// has none (the download cannot check the whole object then).
func (r *Record) AllSums() []uint32 {
	present := r.PresentBools()
	sums := make([]uint32, len(present))
	for i, p := range present {
		if !p {
			continue
		}
		sum, ok := r.ChunkSum(i)
		if !ok {
			return nil
		}
		sums[i] = sum
	}
	return sums
}

// ForgetSums drops every sum: the file is written where the daemon cannot
// see it (passthrough).
func (r *Record) ForgetSums() bool {
	changed := len(r.Sums) > 0
	r.Sums, r.Written = nil, nil
	return changed
}

// BitSet reports whether bit i of a record's bitmap (Present, Written)
// is set.
func BitSet(b []byte, i int) bool { return i/8 < len(b) && b[i/8]&(1<<(i%8)) != 0 }

func setBit(b []byte, i int) []byte {
	for len(b) <= i/8 {
		b = append(b, 0)
	}
	b[i/8] |= 1 << (i % 8)
	return b
}

// LocalContent reports whether the cache file, not the bucket, holds the
// truth about the content: local changes other than metadata alone or a
// copy of another object.
func (r *Record) LocalContent() bool { return r.Dirty && !r.MetaOnly && r.CopyFrom == "" }

// PendingCopy reports whether the content is a copy of another object not
// yet made in the bucket.
func (r *Record) PendingCopy() bool { return r.Dirty && r.CopyFrom != "" }

// HeldWhy says why the file of r is held (not uploaded until Resolve),
// or "" if it is not.
func (r *Record) HeldWhy() string {
	switch {
	case r.Damaged != "":
		return r.Damaged
	case r.Refused != "":
		return "the bucket refused its upload: " + r.Refused
	}
	return ""
}
