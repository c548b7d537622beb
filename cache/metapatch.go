package cache

import (
	"context"
	"errors"
	"fmt"

	"github.com/bucketfs/bucketfs/transfer"
)

// errNoVersion: PatchMeta was asked to patch a file not in the bucket.
var errNoVersion = errors.New("no version in the bucket to patch")

// PatchMeta sets the custom metadata keys of md on object version a in
// the bucket at once, only if a (a.Generation > 0) is still the live
// version, and returns the version's new attributes. Keys not in md are
// kept; the content is not touched.
//
// It is SetMeta's fallback for a file the cache cannot hold (SetMeta
// answered ErrNoSpace), which so has no local changes to send the patch
// in order with. Nothing is recorded or journaled: the patch is done when
// PatchMeta returns nil, and not done otherwise (ErrPrecondition if the
// object changed since a, ErrNotExist if it is gone). OnConfirmed's
// function is not told: the caller forgets what it remembered of the
// name.
func (c *Cache) PatchMeta(ctx context.Context, a transfer.ObjectAttrs, md map[string]string) (transfer.ObjectAttrs, error) {
	if a.Generation <= 0 {
		return transfer.ObjectAttrs{}, fmt.Errorf("%s: %w", a.Name, errNoVersion)
	}
	return c.b.SetMetadata(ctx, a.Name, a.Generation, md)
}
