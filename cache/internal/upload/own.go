package upload

// An entry's own uploads whose answers were lost (a crash, an outage, a
// cut connection): found in the bucket by the upload IDs the entry
// records (Ledger.Tries), and taken as what they are rather than as
// another writer's versions.

import (
	"context"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/integrity"
	"github.com/bucketfs/bucketfs/cache/internal/objmeta"
	"github.com/bucketfs/bucketfs/transfer"
)

// earlierUpload settles, before u sends anything, an upload of local
// content whose earlier tries went unconfirmed (their answers were lost:
// a crash, an outage, a cut connection). If the bucket's live version is
// one of those tries and holds exactly what u would send (sameUpload),
// it is adopted as u's result, nothing is sent, and done is true. If it
// is one of those tries with other bytes or metadata, u goes on, based
// on its generation (returned as base): the bucket has it, so the
// upload replaces it instead of failing its precondition and sending
// everything a second time. Otherwise u goes on as it was. It costs one
// Stat, and only when the record has unconfirmed tries.
func (f *Flow[E]) earlierUpload(ctx context.Context, u Job[E], body integrity.FileSums, mtime time.Time) (base int64, done bool) {
	unconfirmed := len(f.Ledger.Tries(u).Attempts) > 0
	if !unconfirmed || u.Src.From != "" {
		return u.Base, false
	}
	live, err := f.Bucket.Stat(ctx, u.Name)
	gen, ours := f.ownVersionOf(u, live, err)
	if !ours {
		return u.Base, false
	}
	if sameUpload(u, body, mtime, live) {
		f.adoptUpload(ctx, u, body, live)
		return u.Base, true
	}
	f.Ledger.Rebase(u, gen)
	return gen, false
}

// sameUpload reports whether live, a version of u's name written by one
// of its unconfirmed tries, is exactly what u sends: the same size and
// CRC32C as the body scanned for it, the same custom metadata but the
// upload ID, the same content encoding. Without the body's sum (a file
// that could not be read) nothing is the same.
func sameUpload[E any](u Job[E], body integrity.FileSums, mtime time.Time, live transfer.ObjectAttrs) bool {
	if !body.OK || live.Size != u.Size || live.CRC32C != body.Whole || live.ContentEncoding != u.Encoding {
		return false
	}
	return objmeta.SameMeta(live.Metadata, u.Meta, mtime)
}

// adoptUpload settles u with live, its own earlier try that the bucket
// holds, as if u had sent it.
func (f *Flow[E]) adoptUpload(ctx context.Context, u Job[E], body integrity.FileSums, live transfer.ObjectAttrs) {
	if f.supersededDuring(u, live, nil) {
		return
	}
	f.Log.Info("the bucket already holds this file from an upload whose answer was lost: confirmed without sending it again",
		"object", u.Name, "generation", live.Generation)
	f.Ledger.Confirm(u.Name, live, false) // before the change leaves the local overlay
	f.Ledger.Done(ctx, u, body, live, nil)
}

// ownVersionOf reports whether a, what a Stat of u's name answered (with
// err), was written by one of its entry's unconfirmed uploads, and its
// generation.
func (f *Flow[E]) ownVersionOf(u Job[E], a transfer.ObjectAttrs, err error) (int64, bool) {
	if err != nil {
		return 0, false
	}
	return a.Generation, objmeta.WrittenBy(a.Metadata, f.Ledger.Tries(u).Attempts)
}
