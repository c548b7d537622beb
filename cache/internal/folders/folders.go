// Package folders speaks to a bucket's hierarchical namespace: renaming
// a folder with everything under it in one atomic step, telling which
// objects moved with their content, and deleting the empty folders a
// directory leaves behind (in such a bucket folders outlive their
// objects, and many empty ones slow listings down).
//
// It owns one fact about the bucket: whether it has a hierarchical
// namespace at all. Once the bucket said it has none
// (transfer.ErrNotSupported), no folder call is made again for the life
// of the Folders. The decision whether a rename may use the folder call
// (nothing cached under the directory that the bucket does not hold),
// and the freezing of the names under it meanwhile, are package cache's
// (folder.go): they read the cache's entries.
//
// No lock: the fact is an atomic flag; everything else is a call to the
// bucket or a pure function.
package folders

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// RenameWait bounds the wait for the bucket's folder rename, while the
// names under both prefixes wait too. Past it, the rename fails (EIO)
// and the bucket may still make it.
const RenameWait = 5 * time.Minute

// Folders makes the folder calls of one bucket.
type Folders struct {
	b    transfer.Bucket
	log  *slog.Logger
	flat atomic.Bool // the bucket has no hierarchical namespace
}

// New returns the folder calls of b.
func New(b transfer.Bucket, log *slog.Logger) *Folders {
	return &Folders{b: b, log: log}
}

// Flat reports whether the bucket is known to have no hierarchical
// namespace (no folder call is worth making).
func (f *Folders) Flat() bool { return f.flat.Load() }

// Rename asks the bucket to rename folder from to folder to (prefixes
// ending in '/'), waiting at most RenameWait. renamed false with no
// error: the bucket did not do it and nothing changed (no hierarchical
// namespace, or it refused): rename by copies instead. An error: it is
// unknown whether the bucket did it (the answer was lost or late).
func (f *Folders) Rename(ctx context.Context, from, to string) (renamed bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, RenameWait)
	err = f.b.RenameFolder(rctx, from, to)
	cancel()
	switch {
	case errors.Is(err, transfer.ErrNotSupported):
		f.flat.Store(true)
		return false, nil
	case errors.Is(err, transfer.ErrNotRenamed):
		f.log.Info("the bucket did not rename the folder; copying its objects instead", "from", from, "to", to, "err", err)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("renaming folder %s to %s (the bucket may or may not have done it): %w", from, to, err)
	}
	return true, nil
}

// Moved is one object a folder rename moved: its version under the old
// name, and under the new one (a new generation, the same content).
type Moved struct{ Old, New transfer.ObjectAttrs }

// Matched returns, by new name, the objects of after (the bucket's
// objects under to once folder from was renamed to to) that are the
// object of the same name under from in before with the same content
// (transfer.SameContent: the store gives moved objects new generations).
func Matched(from, to string, before, after []transfer.ObjectAttrs) map[string]Moved {
	old := make(map[string]transfer.ObjectAttrs, len(before))
	for _, a := range before {
		old[a.Name] = a
	}
	moved := map[string]Moved{}
	for _, a := range after {
		o := old[from+a.Name[len(to):]]
		if o.Name != "" && transfer.SameContent(o, a) {
			moved[a.Name] = Moved{Old: o, New: a}
		}
	}
	return moved
}

// Prune deletes folder dir, whose directory placeholder was deleted
// (rmdir, or the old name of a directory renamed with copies), with the
// empty folders under it. Only empty folders go (transfer.Bucket). Best
// effort: a failure is logged, and the folder stays.
func (f *Folders) Prune(ctx context.Context, dir string) {
	if f.flat.Load() {
		return
	}
	err := f.b.DeleteEmptyFolders(ctx, dir)
	switch {
	case errors.Is(err, transfer.ErrNotSupported):
		f.flat.Store(true)
	case err != nil && ctx.Err() == nil:
		f.log.Info("deleting an empty folder failed; it stays in the bucket", "folder", dir, "err", err)
	}
}
