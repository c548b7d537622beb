package upload

// Conflict copies: a local version whose upload the bucket refused
// because another writer replaced the object it was based on is saved
// beside that object, as NAME.bucketfs-conflict-TIME (objmeta.ConflictName).
//
// The copy carries what an upload at the name would have carried: the
// custom metadata (mode, owner, extended attributes), the file's
// modification time (objmeta.MtimeKey, from the data file as for any
// upload), the content type and encoding, and an upload ID of its own
// (objmeta.AttemptKey). The ID and the copy's name are written to the
// journal before the copy is sent (Ledger.RecordAttempt), so that a try
// whose answer was lost (the request took effect, the connection broke
// before the answer; or the process died) is found in the bucket by the
// next try and confirmed, not made a second time under the next second's
// name.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/integrity"
	"github.com/bucketfs/bucketfs/cache/internal/objmeta"
	"github.com/bucketfs/bucketfs/transfer"
)

// maxCopyNames bounds the names a conflict copy tries when the ones
// before are taken (by copies of other versions made in the same
// second).
const maxCopyNames = 20

// saveConflict uploads u's local version beside the object that changed
// in the bucket (see the top of this file). If the local copy did not
// change meanwhile, the entry then leaves the name (Ledger.Conflict), so
// the name shows the remote version again.
func (f *Flow[E]) saveConflict(ctx context.Context, u Job[E], body integrity.FileSums, mtime time.Time) error {
	name := u.Name
	sibling := f.earlierCopy(ctx, u, body, mtime)
	if sibling != "" {
		f.Log.Info("the bucket already holds the conflict copy of this file from a try whose answer was lost: confirmed without sending it again",
			"object", name, "copy", sibling)
	} else {
		var err error
		if sibling, err = f.sendCopy(ctx, u, body, mtime); err != nil {
			return fmt.Errorf("saving the local version of %s beside a changed remote object: %w", name, err)
		}
	}
	f.Log.Warn("the object changed in the bucket while it had local changes: the remote version stays, the local version was saved beside it",
		"object", name, "local_version_saved_as", sibling)
	if sa, err := f.Bucket.Stat(ctx, sibling); err == nil {
		f.Ledger.Confirm(sibling, sa, false)
	}
	ra, err := f.Bucket.Stat(ctx, name)
	known := err == nil || errors.Is(err, transfer.ErrNotExist) // what the name shows now
	gone := err != nil
	if known {
		f.Ledger.Confirm(name, ra, gone)
		f.Ledger.NoteConflict(name, ra, gone, false)
	}
	settled := f.Ledger.Conflict(u, sibling)
	if settled && known {
		f.Ledger.NoteConflict(name, ra, gone, true)
	}
	return nil
}

// sendCopy sends u's local version as a new object beside u's name,
// under the first conflict name not taken, and returns that name. Every
// try carries the same upload ID, recorded with the name before it is
// sent. A name found taken by this very copy (a try whose answer was
// lost, sent again by the client's retry) is the copy.
func (f *Flow[E]) sendCopy(ctx context.Context, u Job[E], body integrity.FileSums, mtime time.Time) (string, error) {
	now := time.Now()
	attempt := objmeta.NewAttemptID()
	var err error
	for try := 1; try <= maxCopyNames; try++ {
		sibling := objmeta.ConflictName(u.Name, now, try)
		if err = f.Ledger.RecordAttempt(u, attempt, sibling); err != nil {
			return "", err
		}
		o := body.Put(transfer.PutOptions{IfGenerationMatch: 0, ContentType: u.ContentType, ContentEncoding: u.Encoding,
			Metadata: objmeta.ForUpload(u.Meta, mtime, attempt)})
		_, err = f.Sender.Send(ctx, sibling, u.ID, u.Size, u.Src, o)
		if !errors.Is(err, transfer.ErrPrecondition) {
			return sibling, err
		}
		if live, serr := f.Bucket.Stat(ctx, sibling); f.ownCopy(u, body, mtime, live, serr) {
			return sibling, nil
		}
	}
	return "", err
}

// earlierCopy returns the name of the conflict copy of u's local version
// that an earlier try put in the bucket unconfirmed, if the entry names
// one (Tries.SavingAs) and the object there is it (ownCopy); else "". It
// costs one Stat, and only after a try of a copy that was not confirmed.
func (f *Flow[E]) earlierCopy(ctx context.Context, u Job[E], body integrity.FileSums, mtime time.Time) string {
	as := f.Ledger.Tries(u).SavingAs
	if as == "" {
		return ""
	}
	if live, err := f.Bucket.Stat(ctx, as); f.ownCopy(u, body, mtime, live, err) {
		return as
	}
	return ""
}

// ownCopy reports whether live (what a Stat answered, with err) was
// written by one of the tries recorded for u's entry and holds exactly
// what u sends: for the data file, what sameUpload compares; for a
// server-side copy, the same size and custom metadata.
func (f *Flow[E]) ownCopy(u Job[E], body integrity.FileSums, mtime time.Time, live transfer.ObjectAttrs, err error) bool {
	if err != nil {
		return false
	}
	if !objmeta.WrittenBy(live.Metadata, f.Ledger.Tries(u).Attempts) {
		return false
	}
	if u.Src.From != "" {
		return live.Size == u.Size && objmeta.SameMeta(live.Metadata, u.Meta, mtime)
	}
	return sameUpload(u, body, mtime, live)
}
