package report

import (
	"sort"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
)

// Stats is a snapshot of a cache's counters.
type Stats struct {
	Entries   int
	UsedBytes int64 // reserved by cached versions, complete or not
	MaxBytes  int64
	Hits      int64 // opens served by a complete local copy
	Misses    int64 // opens that needed a download
	Uncached  int64 // opens served straight from the bucket (too big for the cache)
	Evictions int64
	// Write-back.
	DirtyFiles int
	DirtyBytes int64
	Uploads    int64 // versions uploaded
	Conflicts  int64 // local versions saved beside a changed remote object
	// UploadFailures counts failed tries to send a change (an upload or
	// a deletion); each is tried again later.
	UploadFailures int64
	// ReadBytes counts bytes handles read from local cache files. Reads
	// the kernel serves itself (FUSE passthrough) are not seen.
	ReadBytes int64
	// Fetched counts the bytes downloads fetched, by reason (cache's
	// fetch.go).
	Fetched FetchedBytes
	// PrefetchUsedBytes counts bytes of prefetched copies an open took
	// later; PrefetchWastedBytes those that left the cache (or the
	// mount ended) before any open (cache's prefetch.go).
	PrefetchUsedBytes   int64
	PrefetchWastedBytes int64
	// ChecksumMismatches counts cached copies (or downloads) that failed
	// a checksum or size check (cache's checksum.go); DamagedFiles is how
	// many changed files are held now, for it or for an upload the bucket
	// refused as invalid (cache's refusal.go).
	ChecksumMismatches int64
	DamagedFiles       int
	// Pinned copies (cache's warm.go): kept from eviction, counted in
	// UsedBytes.
	PinnedFiles int
	PinnedBytes int64
}

// FetchedBytes counts the bytes downloads fetched, by why.
type FetchedBytes struct {
	Read      int64 // a reader waited for them
	Readahead int64 // ahead of a reader reading in order
	Whole     int64 // a whole object's background walk (and the prefetch of small files)
	Warm      int64 // 'bucketfs warm'
}

// Status is a snapshot of a cache and of its write-back.
type Status struct {
	Stats

	// OldestDirty is when the longest-waiting change not yet in the
	// bucket was made (its file went from clean to changed); zero when
	// nothing is dirty. A change found at start (left by the last run)
	// counts from the start.
	OldestDirty time.Time
	Queued      int // names waiting in the upload queue (for their write-back delay, a retry, or a slot)
	Uploading   int // uploads and deletions being sent now
	Downloading int // object downloads running now

	// Dirty lists up to the number of files asked for, oldest first.
	Dirty []DirtyFile
	// Errors are the most recent write-back and download failures,
	// oldest first (at most MaxRecentErrors).
	Errors []ErrorEvent
	// Held lists every changed file held for a failed checksum check
	// (see cache's Resolve), by name.
	Held []HeldFile
	// Refused lists the changed files whose last upload the bucket
	// refused in a way a person can fix (credentials, a missing
	// bucket): they are tried again every few minutes (cache's
	// refusal.go).
	Refused []RefusedFile
}

// RefusedFile is a changed file whose last upload the bucket refused.
type RefusedFile struct {
	Name  string
	Since time.Time // the refusal
	Why   string
}

// HeldFile is a changed file that failed its checksum check.
type HeldFile struct {
	Name string
	Why  string
}

// DirtyFile is one file with changes not yet in the bucket.
type DirtyFile struct {
	Name      string
	Size      int64
	Since     time.Time // when it became dirty
	Deleted   bool      // the change is a deletion
	Uploading bool      // being sent now
}

// File is what a snapshot counts of one cached file: its record, and
// the facts of its entry that the record does not hold.
type File struct {
	Name       string
	Rec        *durable.Record // read only
	Charged    int64           // the bytes it counts against the cap
	Walking    bool            // its download runs
	Uploading  bool            // its change is being sent
	Since      time.Time       // when it went from clean to changed (the start, if before)
	RefusedAt  time.Time       // when the bucket last refused its upload in a way a person can fix
	RefusedWhy string          // what the bucket said then; "" if it has not since a success
}

// Add counts f in s, and lists it where it belongs: in Held if its
// change is held, in Refused if its last upload was refused, in Dirty
// (if maxDirty > 0) if it is changed. Order then sorts the lists and
// cuts Dirty to maxDirty.
func (s *Status) Add(f File, maxDirty int) {
	if f.Walking {
		s.Downloading++
	}
	if f.Rec.Pinned {
		s.PinnedFiles++
		s.PinnedBytes += f.Charged
	}
	if !f.Rec.Dirty {
		return
	}
	if why := f.Rec.HeldWhy(); why != "" {
		s.DamagedFiles++
		s.Held = append(s.Held, HeldFile{Name: f.Name, Why: why})
	}
	if f.RefusedWhy != "" {
		s.Refused = append(s.Refused, RefusedFile{Name: f.Name, Since: f.RefusedAt, Why: f.RefusedWhy})
	}
	s.DirtyFiles++
	size := dirtySize(f.Rec)
	s.DirtyBytes += size
	if s.OldestDirty.IsZero() || f.Since.Before(s.OldestDirty) {
		s.OldestDirty = f.Since
	}
	if maxDirty > 0 {
		s.Dirty = append(s.Dirty, DirtyFile{Name: f.Name, Size: size, Since: f.Since, Deleted: f.Rec.Deleted, Uploading: f.Uploading})
	}
}

// dirtySize is what a changed file's record r counts in DirtyBytes: its
// size, or nothing for a deletion (it sends no bytes and costs no room).
func dirtySize(r *durable.Record) int64 {
	if r.Deleted {
		return 0
	}
	return r.Size
}

// Order puts the lists of s in the order their fields say: Held and
// Refused by name, Dirty oldest change first (ties by name), keeping the
// first maxDirty of it. The lists are sorted in place.
func (s *Status) Order(maxDirty int) {
	sort.Slice(s.Held, func(i, j int) bool { return s.Held[i].Name < s.Held[j].Name })
	sort.Slice(s.Refused, func(i, j int) bool { return s.Refused[i].Name < s.Refused[j].Name })
	dirty := s.Dirty
	sort.Slice(dirty, func(i, j int) bool {
		if !dirty[i].Since.Equal(dirty[j].Since) {
			return dirty[i].Since.Before(dirty[j].Since)
		}
		return dirty[i].Name < dirty[j].Name
	})
	if len(dirty) > maxDirty {
		s.Dirty = dirty[:maxDirty]
	}
}
