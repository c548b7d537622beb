package cache

import (
	"context"
	"strings"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/folders"
	"github.com/bucketfs/bucketfs/cache/internal/holds"
)

// Directory rename in a bucket with a hierarchical namespace: the store
// renames a folder, with everything under it, in one atomic step. The
// flow (when it is tried, the bucket's call, the listing after it, which
// objects moved) is package internal/dirrename's; here are its steps that
// read or change entries. RenameDir uses it when the index has nothing to
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
// same content; a copy that does not is dropped (Forget).
//
// Folders outlive their objects in such a bucket: package
// internal/folders deletes the empty ones a directory leaves behind, and
// makes the folder calls.

// Freeze checks the entries under from and to, and c.holds and c.quiet,
// and adds both prefixes to c.frozen if the folder may move.
func (l dirLedger) Freeze(from, to string) ([]*entry, bool) {
	c := l.c
	c.mu.Lock()
	defer c.mu.Unlock()
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
		return nil, false
	}
	c.frozen.Add(from, to)
	return checked, true
}

// Moved is one object a folder rename moved: its version under the old
// name, and under the new one (a new generation, the same content).
type Moved = folders.Moved

// settledCleanLocked reports whether e is a clean copy of a bucket version
// that nothing uses: a folder rename may move it.
func (c *Cache) settledCleanLocked(e *entry) bool {
	r := e.Rec
	return isClosed(e.Ready) && e.Err == nil && !e.Dropped && !r.Dirty && !r.Deleted && !r.PendingCopy() &&
		e.Refs == 0 && e.Writers == 0 && e.Fill.Download() == nil && e.Spare == nil && !e.Uploading &&
		e.Holding == "" && e.DlHold == "" && c.holds.Held(e.Name) == 0
}

// Forget renames, in the index, each checked copy whose version moved
// (old generation the entry's) and drops the others, then journals the
// new names.
func (l dirLedger) Forget(from, to string, checked []*entry, moved map[string]Moved) {
	c := l.c
	var ops []durable.Op
	var victims []*entry
	c.mu.Lock()
	for _, e := range checked {
		if e.Dropped || c.entries[e.Name] != e {
			continue // evicted meanwhile
		}
		if m := moved[to+e.Name[len(from):]]; m.New.Name != "" && m.Old.Generation == e.Rec.Generation {
			ops = append(ops, durable.RemoveOp(e.Name, e.Rec.ID))
			delete(c.entries, e.Name)
			e.Name = to + e.Name[len(from):]
			e.Rec.Generation = m.New.Generation
			c.entries[e.Name] = e
			ops = append(ops, durable.PutOp(e.Name, e.Rec, 0))
			continue
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

// Thaw takes the prefixes out of c.frozen.
func (l dirLedger) Thaw(from, to string) {
	c := l.c
	c.mu.Lock()
	c.frozen.Remove(from, to)
	c.notifyLocked()
	c.mu.Unlock()
}
