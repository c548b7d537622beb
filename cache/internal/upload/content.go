package upload

// An upload of a name's content: the data file, or a server-side copy of
// its pending source.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/integrity"
	"github.com/bucketfs/bucketfs/cache/internal/objmeta"
	"github.com/bucketfs/bucketfs/cache/internal/space"
	"github.com/bucketfs/bucketfs/transfer"
)

// content sends u's content (the data file, or a server-side copy of its
// pending source) and settles the outcome.
func (f *Flow[E]) content(ctx context.Context, u Job[E]) {
	name, base, src := u.Name, u.Base, u.Src
	// The file says how big the copy is (writes through passthrough
	// handles are not counted anywhere else until those handles close),
	// and when it was last changed.
	var mtime time.Time
	if src.From != "" {
		// A copy: its time is in meta already, its size the source's.
	} else if st, err := os.Stat(durable.DataPath(f.DataDir, u.ID)); err == nil {
		u.Size, mtime = st.Size(), st.ModTime()
	}
	if u.Size > space.MaxObjectSize {
		// Written by the kernel (passthrough), nothing held it to the
		// largest object: the bucket would refuse it, after the bytes.
		// It stays, dirty, until a person truncates or deletes it.
		f.Ledger.Stop(ctx, u, f.TooBig(name, u.Size))
		return
	}
	var body integrity.FileSums
	if src.From == "" {
		var held bool
		body, held = f.scan(ctx, u)
		if held {
			f.Ledger.Stop(ctx, u, nil)
			return
		}
	}
	// An earlier try of this content may be in the bucket already,
	// unconfirmed: then nothing, or nothing twice, is sent.
	var adopted bool
	if base, adopted = f.earlierUpload(ctx, u, body, mtime); adopted {
		return
	}
	u.Base = base
	attempt, err := f.noteAttempt(u)
	if err != nil {
		if errors.Is(err, ErrSuperseded) {
			err = nil // replaced: nothing to try again
		}
		f.Ledger.Stop(ctx, u, err)
		return
	}
	// A base below 0 is a deletion of "whatever was there" (a removed
	// directory's placeholder) written again: a new object.
	attrs, err := f.Sender.Send(ctx, name, u.ID, u.Size, src, body.Put(transfer.PutOptions{IfGenerationMatch: max(base, 0), ContentType: u.ContentType, ContentEncoding: u.Encoding, Metadata: objmeta.ForUpload(u.Meta, mtime, attempt)}))
	if f.supersededDuring(u, attrs, err) {
		return
	}
	if f.AfterSend != nil {
		f.AfterSend(name)
	}
	if src.From != "" && errors.Is(err, transfer.ErrNotExist) {
		f.copySourceGone(ctx, u)
		return
	}
	if errors.Is(err, transfer.ErrPrecondition) && strings.HasSuffix(name, "/") {
		// A directory's placeholder: every version is the same empty
		// object, so there is nothing to keep beside it.
		if a, serr := f.Bucket.Stat(ctx, name); serr == nil {
			attrs, err = a, nil
		}
	}
	if errors.Is(err, transfer.ErrPrecondition) {
		if err = f.refused(ctx, u, body, mtime); err == nil {
			return
		}
	}
	if err == nil {
		// Before the change leaves the local overlay, so that listings
		// never miss the name.
		f.Ledger.Confirm(name, attrs, false)
	}
	f.Ledger.Done(ctx, u, body, attrs, err)
}

// scan reads the u.Size bytes of u's changed data file before its
// upload: it sums every chunk and the whole (the upload carries that
// sum), and checks the chunks the application did not write against the
// sums of the version they came from (integrity.Scan). If one fails, the
// entry is held (Ledger.Hold); held is then true. A file that cannot be
// read is uploaded without a checksum, as before (the upload reads it
// too, and says why it cannot).
func (f *Flow[E]) scan(ctx context.Context, u Job[E]) (body integrity.FileSums, held bool) {
	ref := u.Ref
	if ref.Chunk <= 0 {
		ref.Chunk = f.ChunkSize
	}
	fl, err := os.Open(durable.DataPath(f.DataDir, u.ID))
	if err != nil {
		return integrity.FileSums{}, false
	}
	defer fl.Close()
	sums, bad, why := integrity.Scan(ctx, fl, u.Size, ref)
	if len(bad) == 0 {
		return sums, false
	}
	return integrity.FileSums{}, f.Ledger.Hold(u, bad, why)
}

// noteAttempt records, in the journal, the ID of an upload of u's
// content at its name about to be sent, before it is sent.
func (f *Flow[E]) noteAttempt(u Job[E]) (string, error) {
	id := objmeta.NewAttemptID()
	return id, f.Ledger.RecordAttempt(u, id, "")
}

// refused handles an upload of u the bucket refused because its version
// is not the one u is based on. It returns nil once that is settled:
// the upload is queued again (the bucket's version is an unconfirmed
// upload of ours), or the local version was saved beside the bucket's.
// If the bucket does not say what it holds now, nothing is decided: the
// error is the upload's, tried again later (a copy beside would be
// needless if the version there is an unconfirmed try of ours).
func (f *Flow[E]) refused(ctx context.Context, u Job[E], body integrity.FileSums, mtime time.Time) error {
	name, base := u.Name, u.Base
	live, serr := f.Bucket.Stat(ctx, name)
	if serr != nil && !errors.Is(serr, transfer.ErrNotExist) {
		return fmt.Errorf("the bucket refused the upload of %s (its version changed), and asking what it holds now failed: %w", name, serr)
	}
	if errors.Is(serr, transfer.ErrNotExist) && base > 0 {
		// Deleted in the bucket since the version the change is based
		// on: the change wins over the deletion (the application that
		// wrote it finds it at its name). It goes again as a new object
		// (ifGenerationMatch=0): a version written meanwhile refuses it,
		// and then both are kept.
		f.Log.Warn("the object was deleted in the bucket while it had local changes: the deletion is overridden, the local version is uploaded at its name", "object", name, "based_on", base)
		f.Ledger.Requeue(u, 0)
		return nil
	}
	gen, ours := f.ownVersionOf(u, live, serr)
	if ours && sameUpload(u, body, mtime, live) {
		// What this upload sends is there already: sending it again
		// would only make a new generation of the same bytes.
		f.adoptUpload(ctx, u, body, live)
		return nil
	}
	if ours {
		// The bucket holds an upload of ours whose answer a crash
		// (or a lost response) kept from us: not a conflict. Send
		// the copy again, based on it.
		f.Log.Info("the bucket holds an earlier upload of this file that was not confirmed; uploading again on top of it", "object", name, "generation", gen)
		f.Ledger.Requeue(u, gen)
		return nil
	}
	f.Log.Info("upload refused: the bucket's version is not the one the local change is based on", "object", name, "based_on", base, "bucket_generation", gen)
	err := f.saveConflict(ctx, u, body, mtime)
	if err == nil {
		f.Ledger.Uploaded(u) // what was written is in the bucket, beside
	}
	return err
}

// copySourceGone settles a copy whose source version was not found: it
// was changed or deleted in the bucket by someone else before the copy
// was made. A complete cache file still has the bytes: they are uploaded
// instead. Otherwise the content is gone with the source
// (Ledger.SourceGone).
func (f *Flow[E]) copySourceGone(ctx context.Context, u Job[E]) {
	// What the source's name holds now goes in the log: with no other
	// writer, a version gone is a bug of the cache (issue 17, item 6).
	now := "nothing"
	if a, err := f.Bucket.Stat(ctx, u.Src.From); err == nil {
		now = fmt.Sprintf("generation %d, metageneration %d", a.Generation, a.Metageneration)
	}
	f.Ledger.SourceGone(u, now)
}
