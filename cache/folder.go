package cache

import (
	"context"
	"strings"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/folders"
	"github.com/bucketfs/bucketfs/cache/internal/holds"
	"github.com/bucketfs/bucketfs/transfer"
)

// Directory rename in a bucket with a hierarchical namespace. There the
// store renames a folder, with everything under it, in one atomic step
// (transfer.Bucket.RenameFolder): no copies, no deletions, nothing to
// resume after a crash. RenameDir uses it when the index has nothing to
// add to what the bucket holds under the directory:
//
//   - every entry under the old prefix is a clean copy of the bucket's
//     version, with no handle, download or upload, and no pending copy
//     reads it;
//   - nothing is under the new prefix, in the index or the bucket.
//
// Otherwise (a file written and not yet uploaded, say) the rename is made
// with copies, as in any bucket (rename.go).
//
// While the store renames, both prefixes are frozen: opening, writing,
// removing or renaming a name under them waits (acquire, Rename,
// RenameDir), so the index under them is what was checked before. After
// it, each cached copy takes its new name if the object there has the
// same content (size and checksums: the store gives moved objects new
// generations); a copy that does not is dropped. If the store's answer
// is lost, it is unknown whether the folder moved: the cached copies
// under the old prefix are dropped and the rename fails (EIO); what the
// bucket says is shown from then on.
//
// Folders outlive their objects in such a bucket: package
// internal/folders deletes the empty ones a directory leaves behind, and
// makes the folder calls.

// tryFolderRename renames directory from to to (prefixes, as RenameDir)
// with the bucket's folder rename, if it can (see above); remote and
// remoteTo are the bucket's objects under them. done says it did, and
// moved holds, by new name, the objects known to have moved with their
// content (none if the new folder could not be listed); false with no
// error: nothing changed, copy instead. Once the bucket said it has no
// hierarchical namespace, it is not asked again.
func (c *Cache) tryFolderRename(ctx context.Context, from, to string, remote, remoteTo []transfer.ObjectAttrs) (moved map[string]Moved, done bool, err error) {
	if c.folders.Flat() || len(remote) == 0 || len(remoteTo) > 0 {
		return nil, false, nil
	}
	c.mu.Lock()
	var checked []*entry
	ok := true
	for name, e := range c.entries {
		if strings.HasPrefix(name, to) {
			ok = false
			break
		}
		if !strings.HasPrefix(name, from) {
			continue
		}
		if !c.settledCleanLocked(e) {
			ok = false
			break
		}
		checked = append(checked, e)
	}
	ok = ok && !c.holds.AnyUnder(from)
	for p, n := range c.quiet.All() {
		// Another directory rename over or under these (this one's
		// own quiesce counts once for each prefix).
		if holds.Overlap(p, from) || holds.Overlap(p, to) {
			ok = ok && (p == from || p == to) && n == 1
		}
	}
	if !ok || c.frozen.Overlaps(from) || c.frozen.Overlaps(to) {
		c.mu.Unlock()
		return nil, false, nil
	}
	c.frozen.Add(from, to)
	c.mu.Unlock()
	defer c.thaw(from, to)

	renamed, err := c.folders.Rename(ctx, from, to)
	if err != nil {
		c.forgetClean(checked, nil, nil)
		return nil, false, err
	}
	if !renamed {
		return nil, false, nil
	}
	list, lerr := c.listAll(ctx, to)
	if lerr != nil {
		c.log.Warn("listing a renamed folder failed; its cached files are dropped", "folder", to, "err", lerr)
		c.forgetClean(checked, nil, nil)
		return map[string]Moved{}, true, nil
	}
	moved = folders.Matched(from, to, remote, list)
	c.forgetClean(checked, func(name string) (transfer.ObjectAttrs, transfer.ObjectAttrs) {
		m := moved[to+name[len(from):]]
		return m.Old, m.New
	}, func(name string) string { return to + name[len(from):] })
	return moved, true, nil
}

// Moved is one object a folder rename moved: its version under the old
// name, and under the new one (a new generation, the same content).
type Moved = folders.Moved

// settledCleanLocked reports whether e is a clean copy of a bucket version
// that nothing uses: a folder rename may move it.
func (c *Cache) settledCleanLocked(e *entry) bool {
	r := e.rec
	return isClosed(e.ready) && e.err == nil && !e.dropped && !r.Dirty && !r.Deleted && !r.PendingCopy() &&
		e.refs == 0 && e.writers == 0 && e.dl == nil && e.spare == nil && !e.uploading &&
		e.holding == "" && e.dlHold == "" && c.holds.Held(e.name) == 0
}

// forgetClean settles the cached copies checked before a folder rename:
// with versions (the old and new attributes of an entry's object, if it
// moved with its content), each copy of the version that moved takes the
// new name (rename), the others are dropped; without, all are dropped.
func (c *Cache) forgetClean(checked []*entry, versions func(name string) (old, new transfer.ObjectAttrs), rename func(string) string) {
	var ops []durable.Op
	var victims []*entry
	c.mu.Lock()
	for _, e := range checked {
		if e.dropped || c.entries[e.name] != e {
			continue // evicted meanwhile
		}
		if versions != nil {
			old, now := versions(e.name)
			if now.Name != "" && old.Generation == e.rec.Generation {
				ops = append(ops, durable.RemoveOp(e.name, e.rec.ID))
				delete(c.entries, e.name)
				e.name = rename(e.name)
				e.rec.Generation = now.Generation
				c.entries[e.name] = e
				ops = append(ops, durable.PutOp(e.name, e.rec, 0))
				continue
			}
		}
		victims = append(victims, c.dropLocked(e)...)
	}
	c.mu.Unlock()
	c.removeAll(victims)
	if len(ops) > 0 {
		if err := c.j.Append(ops...); err != nil {
			// The records keep the old names: stale copies of objects
			// that are gone, dropped when looked up.
			c.log.Warn("recording the new names of a renamed folder's cached files failed", "err", err)
		}
	}
}

// waitThawedLocked waits, with c.mu held (released while waiting), until
// no folder rename moves name.
func (c *Cache) waitThawedLocked(ctx context.Context, name string) error {
	return c.waitLocked(ctx, func() bool { return !c.frozen.Covers(name) })
}

func (c *Cache) thaw(prefixes ...string) {
	c.mu.Lock()
	c.frozen.Remove(prefixes...)
	c.notifyLocked()
	c.mu.Unlock()
}
