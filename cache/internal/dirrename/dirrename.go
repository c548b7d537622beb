package dirrename

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/bucketfs/bucketfs/cache/internal/folders"
	"github.com/bucketfs/bucketfs/transfer"
)

// ErrBusy means a directory rename found the directory changing under it
// and gave up; trying again later works.
var ErrBusy = errors.New("the directory changed while it was being renamed")

// maxTries is how many times a rename plans before it gives up (ErrBusy).
const maxTries = 5

// listParallel is how many pages of one long listing are asked for at
// once (transfer.ListAll).
const listParallel = 16

// errReplan: something under the directory changed between planning a
// rename and making it; plan again.
var errReplan = errors.New("replan")

// Ledger is the cache's side of a directory rename: each method is one
// critical section of the cache's lock, taken and released inside it,
// unless it says it waits. E is the cache's entry, which the flow hands
// back and never looks into.
type Ledger[E any] interface {
	// Quiesce waits until no folder rename moves a name over or under
	// from or to, then stops new transfers of names under both and waits
	// for the deletions running there to end (uploads of content go on:
	// their entries stay), the lock released while it waits. On error
	// (ctx ended) nothing is left quiesced.
	Quiesce(ctx context.Context, from, to string) error

	// Unquiesce lets the transfers Quiesce stopped go again.
	Unquiesce(from, to string)

	// Freeze reports whether the bucket's folder rename may move from to
	// to: every entry under from is a clean copy of the bucket's version
	// that nothing uses or reads, no entry is under to, and no other
	// directory rename is over or under them. If so it freezes both
	// prefixes (their names wait) and returns the entries it checked.
	Freeze(from, to string) (checked []E, ok bool)

	// Forget settles the copies Freeze checked, after the bucket's
	// folder call: a copy still indexed whose version moved (moved, by
	// new name) takes its new name and generation; the others are
	// dropped (all, if moved is nil). The new names are then journaled.
	Forget(from, to string, checked []E, moved map[string]folders.Moved)

	// Thaw ends what Freeze froze, and wakes the names waiting.
	Thaw(from, to string)

	// Plan plans one try by copies: which names under from move, and how,
	// from the entries there now and the bucket's objects under from
	// (remote) and to (remoteTo). wait, if not nil, is an entry under
	// either prefix being made: the try is given up and planned again
	// once wait is closed.
	Plan(from, to string, remote, remoteTo []transfer.ObjectAttrs) (t Try, wait <-chan struct{})
}

// Try is one try of a directory rename by copies, as planned
// (Ledger.Plan), held by the cache; its methods are called in the order
// below, once each at most.
type Try interface {
	// Prepare makes the cache files the new records will name (hard
	// links of local copies, empty files for copies not cached), with no
	// lock held. On error it has removed those it made.
	Prepare() error

	// Build checks, in one critical section, that the plan still holds
	// (no entry under from made, replaced, dropped, deleted or written
	// since; none being made under to; no folder rename started) and, if
	// so, builds the journal entry and publishes the new entries, not
	// ready, the targets they replace set aside and the handles moved to
	// them. It returns false if the plan no longer holds: then nothing
	// changed and the files Prepare made are gone. After true, no record
	// of an old entry is written until Undo or Apply.
	Build() bool

	// Write sizes the files of copies not cached and writes the journal
	// entry, with the old entries' persistMu held (and left held). On
	// error nothing is in the journal.
	Write() error

	// Undo takes back a Build whose Write failed (err): the handles go
	// back, the new entries go (their waiters get err), the targets come
	// back, the files go; the old entries' persistMu is released.
	Undo(err error)

	// Apply, once Write succeeded, lets the new entries be used, gives
	// the targets' names to them, turns the old entries into the
	// deletions written, and releases the old entries' persistMu.
	Apply()
}

// Folders is the bucket's folder calls (folders.Folders).
type Folders interface {
	Flat() bool
	Rename(ctx context.Context, from, to string) (renamed bool, err error)
}

// Flow renames directories: the bucket side, in order, changing the
// cache only through Ledger.
type Flow[E any] struct {
	Ledger  Ledger[E]
	Bucket  transfer.Lister
	Folders Folders
	Log     *slog.Logger
	// AfterPlan, if set (by tests), runs in each try between the plan
	// (and its files) and the commit.
	AfterPlan func(from string)
}

// Rename renames every object under prefix from to the same name under
// prefix to (both end in '/'; to holds no file: the caller checked that
// the target directory is empty). If the bucket renamed the folder
// itself, it returns the objects known to have moved with their content,
// by new name (not nil); otherwise nil, and the bucket follows with
// copies.
func (f Flow[E]) Rename(ctx context.Context, from, to string) (map[string]folders.Moved, error) {
	if !strings.HasSuffix(from, "/") || !strings.HasSuffix(to, "/") || strings.HasPrefix(to, from) {
		return nil, fmt.Errorf("renaming directory %q to %q: %w", from, to, os.ErrInvalid)
	}
	for try := 0; try < maxTries; try++ {
		moved, err := f.once(ctx, from, to)
		if !errors.Is(err, errReplan) {
			return moved, err
		}
	}
	return nil, fmt.Errorf("renaming %s to %s: %w", from, to, ErrBusy)
}

// once is one try of Rename.
func (f Flow[E]) once(ctx context.Context, from, to string) (map[string]folders.Moved, error) {
	// No transfer under either prefix starts, and no deletion ends,
	// while the rename lists and plans: the listing then agrees with the
	// entries (a name whose deletion ended after the listing would come
	// back as a copy of a version that is gone). Uploads running go on:
	// their entries stay, with the generation they reach.
	// Nor does it start while the bucket renames a folder over or under
	// them.
	if err := f.Ledger.Quiesce(ctx, from, to); err != nil {
		return nil, err
	}
	defer f.Ledger.Unquiesce(from, to)
	remote, err := f.listAll(ctx, from)
	if err != nil {
		return nil, fmt.Errorf("listing %s to rename it: %w", from, err)
	}
	remoteTo, err := f.listAll(ctx, to)
	if err != nil {
		return nil, fmt.Errorf("listing %s to rename onto it: %w", to, err)
	}
	if moved, done, err := f.folderRename(ctx, from, to, remote, remoteTo); done || err != nil {
		return moved, err
	}
	t, wait := f.Ledger.Plan(from, to, remote, remoteTo)
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return nil, errReplan
	}
	if err := t.Prepare(); err != nil {
		return nil, err
	}
	if f.AfterPlan != nil {
		f.AfterPlan(from)
	}
	if !t.Build() {
		return nil, errReplan
	}
	if err := t.Write(); err != nil {
		t.Undo(err)
		return nil, fmt.Errorf("renaming %s to %s in the cache index: %w", from, to, err)
	}
	t.Apply()
	return nil, nil
}

// folderRename renames directory from to to with the bucket's folder
// rename, if it can (see the package's comment); remote and remoteTo are
// the bucket's objects under them. done says it did, and moved holds, by
// new name, the objects known to have moved with their content (none if
// the new folder could not be listed); false with no error: nothing
// changed, copy instead. Once the bucket said it has no hierarchical
// namespace, it is not asked again.
func (f Flow[E]) folderRename(ctx context.Context, from, to string, remote, remoteTo []transfer.ObjectAttrs) (moved map[string]folders.Moved, done bool, err error) {
	if f.Folders.Flat() || len(remote) == 0 || len(remoteTo) > 0 {
		return nil, false, nil
	}
	checked, ok := f.Ledger.Freeze(from, to)
	if !ok {
		return nil, false, nil
	}
	defer f.Ledger.Thaw(from, to)
	renamed, err := f.Folders.Rename(ctx, from, to)
	if err != nil {
		f.Ledger.Forget(from, to, checked, nil)
		return nil, false, err
	}
	if !renamed {
		return nil, false, nil
	}
	list, lerr := f.listAll(ctx, to)
	if lerr != nil {
		f.Log.Warn("listing a renamed folder failed; its cached files are dropped", "folder", to, "err", lerr)
		f.Ledger.Forget(from, to, checked, nil)
		return map[string]folders.Moved{}, true, nil
	}
	moved = folders.Matched(from, to, remote, list)
	f.Ledger.Forget(from, to, checked, moved)
	return moved, true, nil
}

// listAll lists every object under prefix in the bucket, all pages (a
// long listing in name ranges at once, transfer.ListAll), in name order.
func (f Flow[E]) listAll(ctx context.Context, prefix string) ([]transfer.ObjectAttrs, error) {
	var out []transfer.ObjectAttrs
	err := transfer.ListAll(ctx, f.Bucket, transfer.ListQuery{Prefix: prefix}, listParallel, func(page transfer.ListPage) error {
		out = append(out, page.Objects...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b transfer.ObjectAttrs) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
