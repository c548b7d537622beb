package upload

import (
	"context"
	"errors"
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
		err = nil
		if gen, ours := f.ownVersion(ctx, u); ours {
			err = f.Bucket.Delete(ctx, name, gen)
		}
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
