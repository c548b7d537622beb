package upload

import (
	"context"
	"errors"
	"log/slog"

	"github.com/bucketfs/bucketfs/cache/internal/folders"
	"github.com/bucketfs/bucketfs/cache/internal/integrity"
	"github.com/bucketfs/bucketfs/cache/internal/send"
	"github.com/bucketfs/bucketfs/transfer"
)

// Job is what one upload sends: the state of its entry when it started,
// taken by the caller under its lock, with the entry marked as uploading.
// Entry says which entry it is, to the Ledger only: this package never
// looks into it.
type Job[E any] struct {
	Entry                 E
	Name                  string
	Version               uint64 // the entry's version then (bumped by every local change)
	Inflight              int    // the entry's changes begun and not ended then
	Base                  int64  // the generation the change is based on (0: none, below 0: whatever is there)
	Size                  int64  // the content's size (the data file's, read again before it is sent)
	ID                    uint64 // the data file
	Deleted, MetaOnly     bool   // a deletion; a change of metadata alone
	Meta                  map[string]string
	Src                   send.Source // a pending copy's source, if any
	ContentType, Encoding string
	Ref                   integrity.Ref // what the scan before the upload checks the file against
	Seq                   uint64        // the number of this upload among the entry's
}

// Tries is what the entry records of its uploads that the bucket has not
// confirmed: the IDs they carried (Attempts, oldest first) and the name
// of the conflict copy being saved, if any (SavingAs).
type Tries struct {
	Attempts []string
	SavingAs string
}

// ErrSuperseded means the entry was replaced (a file renamed over it)
// before its upload was sent: the upload is not needed.
var ErrSuperseded = errors.New("superseded by a newer local version")

// Ledger is the entry's side of a transfer: each method is one state
// transition of the entry a Job names (or a read of its state), made
// under the implementation's own lock, which it takes and releases
// before returning. The Flow calls them with no lock held, in the order
// of its conversation with the bucket, and never holds anything across
// them. No method does network I/O; one may write the record to the
// journal, remove data files the transition let go, and log.
type Ledger[E any] interface {
	// Tries returns what u's entry records now of its unconfirmed
	// uploads, as a copy.
	Tries(u Job[E]) Tries

	// Hold marks u's entry as damaged (held until a person resolves it),
	// since chunks bad of its data file, which it did not write, differ
	// from the version they came from (why), and reports whether it did:
	// not if a write since explains them, or the entry is gone. A hold is
	// recorded and logged before Hold returns.
	Hold(u Job[E], bad []int, why error) bool

	// Stop ends u's upload, which sent nothing: the entry is no longer
	// uploading, and its waiters wake. With err, the upload failed: its
	// next try is scheduled (backed off, or as a refusal a person fixes,
	// or when the bucket is back). With nil, nothing is tried again
	// here (the file is held, or the entry was replaced).
	Stop(ctx context.Context, u Job[E], err error)

	// Rebase bases u's entry on generation gen, one of its own
	// unconfirmed uploads the bucket holds, if it is still based on
	// u.Base. The upload goes on.
	Rebase(u Job[E], gen int64)

	// Requeue ends u's upload, which the bucket refused, and queues the
	// entry again at once, based on gen (0: a new object) if it is still
	// based on u.Base.
	Requeue(u Job[E], gen int64)

	// RecordAttempt adds upload ID id to the unconfirmed tries of u's
	// entry (once; the oldest beyond a bound are forgotten) and, with
	// copyAs, records that name as the conflict copy being saved; it
	// writes the record to the journal before it returns, and fails if
	// it cannot. It returns ErrSuperseded if the entry was replaced
	// meanwhile: then nothing is recorded.
	RecordAttempt(u Job[E], id, copyAs string) error

	// Superseded reports whether u's entry was replaced while the
	// upload ran (a file renamed over it); if so, the upload ends there
	// (no retry, no conflict copy), and if it reached the bucket (err
	// nil) as a, the successor, if it was based on u.Base, is based on a
	// now. The caller confirms a itself.
	Superseded(u Job[E], a transfer.ObjectAttrs, err error) bool

	// Done settles u's upload of content that ended with err (nil: the
	// bucket holds it as attrs, confirmed already; body is what was
	// scanned and sent): the entry is clean if nothing changed since
	// (else queued again), or the failure is scheduled, sent again at
	// once (a file changed while it was sent), or held (refused as
	// invalid too often).
	Done(ctx context.Context, u Job[E], body integrity.FileSums, attrs transfer.ObjectAttrs, err error)

	// Conflict settles u's content saved beside its name as the
	// conflict copy sibling, with the upload confirmed: counted and
	// noted, the copy's name forgotten, and, if nothing changed since
	// and no writer has it open, the entry leaves the name (which shows
	// the bucket's version again). It reports whether it did.
	Conflict(u Job[E], sibling string) (settled bool)

	// Uploaded records that u's content reached the bucket (beside it,
	// as a conflict copy), after Conflict.
	Uploaded(u Job[E])

	// SourceGone settles u, a pending copy whose source version the
	// bucket no longer has (now describes what the source's name holds
	// instead): the cached bytes are sent instead if the copy is
	// complete, else the content is lost, said loudly, and the entry
	// dropped. If the entry is no longer that copy, it is queued again.
	SourceGone(u Job[E], now string)

	// ForgetCopy forgets the generation remembered for u's name as a copy
	// made there lately: the deletion removed it from the bucket.
	ForgetCopy(u Job[E])

	// Deleted settles u's deletion that ended with err (nil: done, or
	// nothing to do); gone (with err nil) says the versions it is about
	// are not in the bucket: false when another writer's version is
	// there, which is not ours to delete and is not confirmed as
	// deleted. A successor renamed over the name meanwhile is based on
	// no version if they are gone.
	Deleted(ctx context.Context, u Job[E], err error, gone bool)

	// Patched settles u's metadata patch that ended with err (nil: done;
	// lost: not applied, the bucket's version stays, and the entry then
	// leaves the name if nothing changed since).
	Patched(ctx context.Context, u Job[E], err error, lost bool)

	// Confirm tells the caller's listener what the bucket holds for name
	// now that one of the entry's changes reached it: a, or (deleted)
	// nothing.
	Confirm(name string, a transfer.ObjectAttrs, deleted bool)

	// NoteConflict tells the caller's listener about a conflict of name:
	// the bucket holds remote (gone: nothing); settled false once the
	// local version is saved beside it, true once it has left the name.
	NoteConflict(name string, remote transfer.ObjectAttrs, gone, settled bool)
}

// Flow is the bucket side of the uploads of one cache: it runs each Job
// to its end, changing the entry only through Ledger.
type Flow[E any] struct {
	Ledger  Ledger[E]
	Bucket  transfer.Bucket
	Sender  *send.Sender     // sends content: the data file or a server-side copy
	Folders *folders.Folders // prunes the folders a deleted directory leaves behind
	DataDir string           // the data files, named by durable.DataPath
	// ChunkSize is the chunk of the sums of a Job whose Ref names none.
	ChunkSize int64
	// TooBig is the error of a file of size bytes, past the largest
	// object the bucket stores.
	TooBig func(name string, size int64) error
	Log    *slog.Logger
	// AfterSend, if set (by tests), runs once the bucket answered an
	// upload of content, after Superseded found the entry in place.
	AfterSend func(name string)
}

// Run sends u, the change of one name, to the bucket once, and settles
// the outcome through the Ledger: a deletion, a metadata patch, or the
// content.
func (f *Flow[E]) Run(ctx context.Context, u Job[E]) {
	switch {
	case u.Deleted:
		f.deleteRemote(ctx, u)
	case u.MetaOnly:
		f.patchMeta(ctx, u)
	default:
		f.content(ctx, u)
	}
}

// supersededDuring settles an upload of u whose entry was replaced while
// the upload ran (a file renamed over it): the application replaced that
// content, so a failure needs no retry and a refusal no conflict copy.
// If the upload succeeded, the bucket now holds it: the successor, based
// on the generation the upload replaced, is now based on the new one.
// It reports whether u's entry was superseded.
func (f *Flow[E]) supersededDuring(u Job[E], a transfer.ObjectAttrs, err error) bool {
	superseded := f.Ledger.Superseded(u, a, err)
	if superseded && err == nil {
		f.Ledger.Confirm(u.Name, a, false)
	}
	return superseded
}
