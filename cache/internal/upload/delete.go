package upload

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bucketfs/bucketfs/transfer"
)

// deleteRemote carries out u, a recorded deletion of its name, based on
// generation u.Base.
func (f *Flow[E]) deleteRemote(ctx context.Context, u Job[E]) {
	name, base := u.Name, u.Base
	unconfirmed := len(f.Ledger.Tries(u).Attempts) > 0
	var err error
	switch {
	case base == 0 && !unconfirmed:
		// Never uploaded: nothing in the bucket to delete.
	case base < 0:
		err = f.Bucket.Delete(ctx, name, 0)
	case base > 0:
		err = f.Bucket.Delete(ctx, name, base)
	}
	if (base == 0 && unconfirmed) || (unconfirmed && errors.Is(err, transfer.ErrPrecondition)) {
		// An upload whose answer never came may have put a version of
		// ours there: delete it if so.
		err = f.deleteOwnTry(ctx, u)
	}
	gone := true // the versions this deletion is about are not in the bucket
	switch {
	case errors.Is(err, transfer.ErrNotExist):
		err = nil // gone already
	case errors.Is(err, transfer.ErrPrecondition):
		// Someone wrote a newer version after the one deleted here: it is
		// not ours to delete.
		f.Log.Warn("not deleted from the bucket: the object changed there since the version deleted here", "object", name, "err", err)
		err, gone = nil, false
	}
	if err == nil && gone {
		f.Ledger.ForgetCopy(u)                               // no version to base a replacement on now
		f.Ledger.Confirm(name, transfer.ObjectAttrs{}, true) // before the deletion leaves the overlay
		if strings.HasSuffix(name, "/") {
			// While the deletion is still recorded: a flush waits for
			// it, and after a crash the next start does it again.
			f.Folders.Prune(ctx, name)
		}
	}
	f.Ledger.Deleted(ctx, u, err, gone)
}

// deleteOwnTry deletes the live version of u's name if one of u's
// unconfirmed uploads wrote it. Nothing there is done (nil). A version
// another writer put there is not ours to delete: a precondition error,
// so that the deletion is settled without being confirmed (the name
// shows that writer's object). A Stat that fails is the deletion's
// failure: it is tried again, since a version of ours may be there.
func (f *Flow[E]) deleteOwnTry(ctx context.Context, u Job[E]) error {
	live, err := f.Bucket.Stat(ctx, u.Name)
	switch gen, ours := f.ownVersionOf(u, live, err); {
	case ours:
		return f.Bucket.Delete(ctx, u.Name, gen)
	case errors.Is(err, transfer.ErrNotExist):
		return nil
	case err != nil:
		return err
	default:
		return fmt.Errorf("%s: generation %d was written by another writer: %w", u.Name, live.Generation, transfer.ErrPrecondition)
	}
}
