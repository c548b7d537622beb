package cache

// The local overlay: what listings and lookups see of the changes not yet
// in the bucket. The index of the names that may be changed, and of their
// directories, is internal/pending's (c.overlay); whether each name still
// counts, and how, is decided here from its entry.

import (
	"maps"
	"os"

	"github.com/bucketfs/bucketfs/transfer"
)

// Local describes the local copy of name if it has changes not yet in the
// bucket: its size and modification time come from the file, Generation
// is the version the changes are based on (0: a new object).
func (c *Cache) Local(name string) (transfer.ObjectAttrs, bool) {
	c.mu.Lock()
	e := c.entries[name]
	if e == nil || !e.rec.Dirty || e.rec.Deleted {
		c.mu.Unlock()
		return transfer.ObjectAttrs{}, false
	}
	a := transfer.ObjectAttrs{Name: name, Generation: e.rec.Generation, Size: e.rec.Size, Metadata: e.rec.Meta}
	path, metaOnly := c.dataPath(e.rec.ID), e.rec.MetaOnly || e.rec.CopyFrom != ""
	watch := e.watch
	c.mu.Unlock()
	if metaOnly {
		// The content, and its size, are the bucket's; the time is what
		// was set here.
		a.Updated, _ = ParseMtime(a.Metadata[MtimeKey])
		return a, true
	}
	if st, err := os.Stat(path); err == nil {
		a.Size, a.Updated = st.Size(), st.ModTime()
		if watch != nil && watch.Holds(st) {
			// Open for writing, nothing written yet: the file's time is
			// a mark (untouched.go).
			c.mu.Lock()
			a.Updated = watch.shownTimeLocked(a.Metadata)
			c.mu.Unlock()
			return a, true
		}
		if _, ok := a.Metadata[MtimeKey]; ok {
			a.Metadata = maps.Clone(a.Metadata) // the file's time is newer than the object's
			a.Metadata[MtimeKey] = FormatMtime(a.Updated)
		}
	}
	return a, true
}

// Settled describes name's cached copy when it has no local changes left
// and its version is one this cache uploaded: its generation and size. A file node
// created or written here asks it once the copy has left the local
// overlay, since the node's own attributes are those of its creation.
func (c *Cache) Settled(name string) (transfer.ObjectAttrs, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[name]
	if e == nil || e.rec.Dirty || e.rec.Deleted || !isClosed(e.ready) || e.err != nil {
		return transfer.ObjectAttrs{}, false
	}
	return transfer.ObjectAttrs{Name: name, Generation: e.rec.Generation, Size: e.rec.Size, Metadata: e.rec.Meta}, e.uploadedHere
}

// LocalNames returns the names under prefix with changes not yet in the
// bucket: those written (present) and those deleted (removed), sorted.
// It costs a binary search and the names under prefix, not a scan of the
// cache: lookups call it for every name.
func (c *Cache) LocalNames(prefix string) (present, removed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.overlay.Prune(prefix, func(name string) bool {
		e := c.entries[name]
		if e == nil || !e.rec.Dirty {
			return false // clean or gone since: dropped from the index
		}
		if e.rec.Deleted {
			removed = append(removed, name)
		} else {
			present = append(present, name)
		}
		return true
	})
	return present, removed
}

// changedUnderLocked reports whether a name under prefix has changes not
// yet in the bucket. It walks the names under prefix in the index of
// names that may be dirty.
func (c *Cache) changedUnderLocked(prefix string) bool {
	for name := range c.overlay.Under(prefix) {
		if e := c.entries[name]; name != prefix && e != nil && e.rec.Dirty {
			return true
		}
	}
	return false
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
// placeholder ("prefix/seg/") was deleted here. A directory's link count
// comes from it (fs), and the kernel asks for that after every create in
// the directory: it costs a binary search per subdirectory in the
// overlay's directories (pending.Names.Subdirs), and the names under each
// until one is written here (all of them, when every name under a
// subdirectory is deleted), not the names directly in prefix. A
// subdirectory whose names are all clean again is still in the index
// until LocalNames drops them: its names are checked here.
func (c *Cache) LocalSubdirs(prefix string) (present, removed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for sub := range c.overlay.Subdirs(prefix) {
		seg := sub[len(prefix) : len(sub)-1]
		made, gone := c.subdirChangeLocked(sub)
		if made {
			present = append(present, seg)
		} else if gone {
			removed = append(removed, seg)
		}
	}
	return present, removed
}

// subdirChangeLocked reports whether a name under directory sub is
// written here (made), or else whether its placeholder is deleted here
// (gone).
func (c *Cache) subdirChangeLocked(sub string) (made, gone bool) {
	for name := range c.overlay.Under(sub) {
		e := c.entries[name]
		switch {
		case e == nil || !e.rec.Dirty:
		case !e.rec.Deleted:
			return true, false
		case name == sub:
			gone = true
		}
	}
	return false, gone
}
