package transfer

// The last step of a parallel upload: the assembled bytes go into place
// under the caller's conditions, in one compose that deletes its sources.

import (
	"context"
	"errors"
	"io"
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

// putInsteadOfXMLCompose puts the object in place when the one-source
// compose of the XML path refused, as a request (refusal: ErrInvalid,
// what GCS answers a request it will not carry out), the object a
// completed XML multipart upload made, obj: GCS's documentation once
// said such objects cannot be composed. The object is sent once more,
// as one resumable upload under the same conditions, metadata and
// checksum (the parts are inside obj, which no other call can use), and
// obj is deleted. Unless that upload is refused as invalid too (then
// the request, not its source, was at fault), later uploads skip the
// XML path for good (noXMLCompose), said once. They compose parts made
// by plain uploads, which compose takes in every version of the
// documentation, and which keeps the parts parallel and the last step
// conditional (one resumable stream each would be slower).
func (p *Parallel) putInsteadOfXMLCompose(ctx context.Context, name string, r io.ReaderAt, size int64, o PutOptions, obj string, refusal error) (ObjectAttrs, error) {
	if err := p.b.Delete(ctx, obj, 0); err != nil && !errors.Is(err, ErrNotExist) {
		// Left for Clean, which the caller calls whatever the outcome.
		p.o.Logger.Debug("deleting a staged object failed", "object", obj, "err", err)
	}
	o.DeleteSources, o.Resumable = false, true
	a, err := p.b.Put(ctx, name, io.NewSectionReader(r, 0, size), o)
	if !errors.Is(err, ErrInvalid) {
		p.noXMLCompose.Store(true)
		p.composeOnce.Do(func() {
			p.o.Logger.Warn("the bucket refuses to compose an object made by an XML multipart upload: large files are uploaded as parallel parts composed into place from now on", "object", name, "reason", refusal)
		})
	}
	return a, err
}
