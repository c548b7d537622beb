package verify

import (
	"errors"
	"fmt"

	"github.com/bucketfs/bucketfs/transfer"
)

// ErrDamaged means a file with changes not yet in the bucket failed its
// checksum check: it is held, neither uploaded nor removed, until an
// operator keeps the local bytes or takes the bucket's version (Resolve).
var ErrDamaged = errors.New("the cached copy of a changed file failed its checksum check and is held")

// Damaged is the error a held file answers: name is held for why.
func Damaged(name, why string) error { return fmt.Errorf("%s: %w: %s", name, ErrDamaged, why) }

// ErrBadCopy labels a clean copy that failed a check (Status errors).
var ErrBadCopy = errors.New("cached copy damaged; fetched again")

// Ledger is what the checks need of one entry of the cache: how its copy
// stands, and every change a check's outcome makes to it. Package cache
// implements it, one value per entry. Each method is one critical
// section of the cache's lock, taken and released inside, and is called
// with no lock held. Drop and Hold then log and write the record to the
// journal, Release and DropHeld may remove data files, Confirm calls the
// cache's listener; none reads a data file or calls the bucket.
type Ledger interface {
	// State reports how the entry's copy stands now.
	State() State

	// Span reports chunks [first, last] of the copy (they exist) and the
	// copy, as they stand now, for Chunks to plan and Settle to compare.
	Span(first, last int) Span

	// Settle records that chunks checked, read after Span reported s,
	// matched their sums, if the entry is still as s saw it (the same
	// Version, as clean as it was): current. Else (written meanwhile)
	// it records nothing, and trust reports whether the file is now the
	// truth: a changed file, not held.
	Settle(s Span, checked []int) (current, trust bool)

	// Drop takes chunks bad, which failed their check (why), out of the
	// clean copy: they are fetched again, and no longer count as
	// checked. Nothing, if the copy is no longer clean or a download
	// fills it. A drop is counted, noted (ErrBadCopy), logged and
	// journaled before Drop returns.
	Drop(bad []int, why error)

	// Hold marks the changed file as damaged (held until an operator
	// resolves it), since chunks bad, which it did not write, differ
	// from the version they came from (why), and reports whether it
	// did: not if a write since explains them all, or the entry is gone.
	// A hold is counted, noted (ErrDamaged), logged and journaled before
	// Hold returns.
	Hold(bad []int, why error) bool

	// StartCheck begins the background check of the copy, done to be
	// closed when it ends: it takes a reference to the entry (until
	// Release) and returns done, with the entry's name, and the copy's
	// data file ID and number of chunks. If a check runs already, it
	// returns that one's channel and begins nothing; if the entry was
	// dropped or the cache is closing, nil. A check it begins is counted
	// in the Checker's WG (Add) inside the same critical section that
	// saw the cache open, so that a Close after it waits for the check
	// (the check calls Done).
	StartCheck(done chan struct{}) (running <-chan struct{}, name string, id uint64, chunks int)

	// EndCheck marks the check StartCheck began as ended: the next
	// StartCheck begins another. It is called before done is closed.
	EndCheck()

	// Release gives up the reference StartCheck took, after EndCheck and
	// done closed: the copy may be evicted, or removed if it was dropped.
	Release()

	// DropHeld takes the bucket's version for name, the entry's held
	// file, whose local bytes (data file id, the entry at version, as
	// State and the caller saw them) are kept: the hold ends, the entry
	// leaves the index and its data file is removed. Unless anything
	// changed since (name holds another entry, a writer has it open, a
	// write, a new data file): then nothing is dropped, and it reports
	// false.
	DropHeld(name string, id, version uint64) bool

	// Confirm tells the cache's listener that name shows a (or nothing:
	// deleted) as the bucket has it now.
	Confirm(name string, a transfer.ObjectAttrs, deleted bool)
}

// State is how an entry's copy stands at one instant (Ledger.State).
type State struct {
	Name        string // the entry's name
	Held        string // why the file is held (ErrDamaged); "" if it is not
	Clean       bool   // a copy of a version in the bucket: not changed here, deleted or held
	Complete    bool   // every byte of the version is in the file
	Downloading bool   // a download fills the copy
	Writing     bool   // a handle has the file open for writing
	AllChecked  bool   // every chunk with a sum was checked (or fetched) by this process
	Size        int64  // the version's size, as the record says
	Chunks      int    // its number of chunks
	ID          uint64 // its data file
}

// Span is what Chunks reads of a range of chunks before it checks them
// (Ledger.Span).
type Span struct {
	First           int     // the index of Chunks[0]
	Chunks          []Chunk // chunks First.. of the copy
	Clean           bool    // as State.Clean
	Held            bool    // the file is held
	ChunkSize, Size int64   // the copy's chunk size and size
	Version         uint64  // the entry's local changes so far, for Settle
}

// Chunk is one chunk of a Span.
type Chunk struct {
	Checked bool   // checked against its sum (or fetched) by this process
	HasSum  bool   // the record has a sum to check it against (Sum)
	Sum     uint32 // its CRC-32C, as the record keeps it
	Present bool   // its bytes are in the file (the record says so)
}
