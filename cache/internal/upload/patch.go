package upload

import (
	"context"
	"errors"
	"fmt"

	"github.com/bucketfs/bucketfs/transfer"
)

// patchMeta sends u, a change of its name's custom metadata alone, as a
// patch conditional on generation u.Base, and settles the outcome. If
// the object changed in the bucket meanwhile (or is gone), the bucket's
// version wins and the change is dropped, with a warning.
func (f *Flow[E]) patchMeta(ctx context.Context, u Job[E]) {
	name, base := u.Name, u.Base
	var attrs transfer.ObjectAttrs
	err := fmt.Errorf("%s: %w", name, transfer.ErrPrecondition) // no version to patch: as refused, not retried for ever
	if base > 0 {
		attrs, err = f.Bucket.SetMetadata(ctx, name, base, u.Meta)
	}
	if f.supersededDuring(u, attrs, err) {
		return
	}
	lost := false
	if errors.Is(err, transfer.ErrPrecondition) || errors.Is(err, transfer.ErrNotExist) {
		// Attributes are not content: there is no copy to keep beside.
		f.Log.Warn("an attribute change (mode, owner or times) was not applied: the object changed in the bucket, or is gone, since the version it was made on; the bucket's version stays",
			"object", name, "based_on", base, "err", err)
		err, lost = nil, true
	}
	if err == nil && !lost {
		f.Ledger.Confirm(name, attrs, false)
	}
	f.Ledger.Patched(ctx, u, err, lost)
}
