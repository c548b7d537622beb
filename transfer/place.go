package transfer

// The last step of a parallel upload: the assembled bytes go into place
// under the caller's conditions, in one compose that deletes its sources.

import (
	"context"
	"errors"
	"maps"
)

// composeInPlace composes srcs into name under o (o.DeleteSources set)
// and returns the new version's attributes. size is what the object
// holds once composed.
//
// The client sends a compose with a precondition again when its answer
// is lost (a 503, a cut connection). If the lost one took effect, it
// deleted the sources and moved the object to a new generation, and the
// retry is refused although the object is in place: ErrNotExist (the
// sources) or ErrPrecondition (the generation), whichever the store
// checks first (the emulator checks the precondition first; GCS does
// not document its order). Then, and only if o.Metadata is not empty
// (it carries the caller's unique upload ID), the live object is taken
// as this upload's if it has exactly o.Metadata, size bytes and, with
// o.SendCRC32C, o.CRC32C; otherwise the error is returned as it was.
func (p *Parallel) composeInPlace(ctx context.Context, name string, srcs []string, size int64, o PutOptions) (ObjectAttrs, error) {
	a, err := p.b.Compose(ctx, name, srcs, o)
	if !(errors.Is(err, ErrNotExist) || errors.Is(err, ErrPrecondition)) || len(o.Metadata) == 0 {
		return a, err
	}
	live, serr := p.b.Stat(ctx, name)
	if serr != nil || !composedAs(live, size, o) {
		return a, err
	}
	p.o.Logger.Info("the compose into place took effect but its answer was lost (its retry was refused): the object in place is this upload's", "object", name, "generation", live.Generation)
	return live, nil
}

// composedAs reports whether a is what a compose under o made of size
// bytes: the same custom metadata (o's upload ID among it), the size,
// and the checksum where o sent one.
func composedAs(a ObjectAttrs, size int64, o PutOptions) bool {
	return a.Size == size && maps.Equal(a.Metadata, o.Metadata) && (!o.SendCRC32C || a.CRC32C == o.CRC32C)
}
