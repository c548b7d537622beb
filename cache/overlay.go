package cache

// The local overlay: what listings and lookups see of the changes not yet
// in the bucket. The index of the names that may be changed, and of their
// directories, is internal/pending's (c.overlay), and so are the rules of
// which names count, and how, under a prefix; what each name stands for
// (changeLocked) is told here from its entry.

import (
	"os"

	"github.com/bucketfs/bucketfs/cache/internal/objmeta"
	"github.com/bucketfs/bucketfs/cache/internal/pending"
	"github.com/bucketfs/bucketfs/transfer"
)

// Local describes the local copy of name if it has changes not yet in the
// bucket: its size and modification time come from the file, Generation
// is the version the changes are based on (0: a new object).
func (c *Cache) Local(name string) (transfer.ObjectAttrs, bool) {
	c.mu.Lock()
	e := c.entries[name]
	if e == nil || !e.Rec.Dirty || e.Rec.Deleted {
		c.mu.Unlock()
		return transfer.ObjectAttrs{}, false
	}
	a := transfer.ObjectAttrs{Name: name, Generation: e.Rec.Generation, Size: e.Rec.Size, Metadata: e.Rec.Meta}
	path, metaOnly := c.dataPath(e.Rec.ID), e.Rec.MetaOnly || e.Rec.CopyFrom != ""
	watch := e.watch
	c.mu.Unlock()
	if metaOnly {
		// The content, and its size, are the bucket's; the time is what
		// was set here.
		a.Updated, _ = ParseMtime(a.Metadata[MtimeKey])
		return a, true
	}
	st, err := os.Stat(path)
	if err != nil {
		return a, true
	}
	if watch != nil && watch.Holds(st) {
		// Open for writing, nothing written yet: the file's time is a
		// mark (untouched.go).
		c.mu.Lock()
		a.Size, a.Updated = st.Size(), watch.shownTimeLocked(a.Metadata)
		c.mu.Unlock()
		return a, true
	}
	return objmeta.OfFile(a, st.Size(), st.ModTime()), true
}

// Settled describes name's cached copy when it has no local changes left
// and its version is one this cache uploaded: its generation and size. A file node
// created or written here asks it once the copy has left the local
// overlay, since the node's own attributes are those of its creation.
func (c *Cache) Settled(name string) (transfer.ObjectAttrs, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[name]
	if e == nil || e.Rec.Dirty || e.Rec.Deleted || !isClosed(e.Ready) || e.Err != nil {
		return transfer.ObjectAttrs{}, false
	}
	return transfer.ObjectAttrs{Name: name, Generation: e.Rec.Generation, Size: e.Rec.Size, Metadata: e.Rec.Meta}, e.UploadedHere
}

// LocalNames returns the names under prefix with changes not yet in the
// bucket: those written (present) and those deleted (removed), sorted
// (pending.Names.Changes, which drops the names clean again).
func (c *Cache) LocalNames(prefix string) (present, removed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overlay.Changes(prefix, c.changeLocked)
}

// changeLocked is what name stands for in the local overlay: its entry
// dirty, and deleted or not.
func (c *Cache) changeLocked(name string) pending.Change {
	switch e := c.entries[name]; {
	case e == nil || !e.Rec.Dirty:
		return pending.Clean
	case e.Rec.Deleted:
		return pending.Deleted
	}
	return pending.Written
}

// markLocalLocked adds name to the index of names that may have changes
// not yet uploaded. Every place that makes an entry dirty calls it;
// LocalNames drops names that are clean again.
func (c *Cache) markLocalLocked(name string) {
	c.overlay.Add(name)
}

// LocalSubdirs returns the subdirectories of directory prefix (their
// names in it) that changes not yet in the bucket make or remove: present,
// those holding a name written here; removed, those holding none whose
// placeholder ("prefix/seg/") was deleted here (pending.Names.SubdirChanges,
// which says what it costs).
func (c *Cache) LocalSubdirs(prefix string) (present, removed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overlay.SubdirChanges(prefix, c.changeLocked)
}
