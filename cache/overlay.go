package cache

// The local overlay: what listings and lookups see of the changes not yet
// in the bucket.

import (
	"maps"
	"os"
	"sort"
	"strings"

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
		if watch != nil && watch.holds(st) {
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
	idx := c.localIdx
	start := sort.SearchStrings(idx, prefix)
	end := start
	for end < len(idx) && strings.HasPrefix(idx[end], prefix) {
		end++
	}
	keep := start
	var dropped []string
	for _, name := range idx[start:end] {
		e := c.entries[name]
		if e == nil || !e.rec.Dirty {
			dropped = append(dropped, name) // clean or gone since: dropped from the index below
			continue
		}
		idx[keep] = name
		keep++
		if e.rec.Deleted {
			removed = append(removed, name)
		} else {
			present = append(present, name)
		}
	}
	if keep < end {
		c.localIdx = append(idx[:keep], idx[end:]...)
		c.localDirs.remove(dropped)
	}
	return present, removed
}

// changedUnderLocked reports whether a name under prefix has changes not
// yet in the bucket. It walks the names under prefix in the index of
// names that may be dirty.
func (c *Cache) changedUnderLocked(prefix string) bool {
	idx := c.localIdx
	for i := sort.SearchStrings(idx, prefix); i < len(idx) && strings.HasPrefix(idx[i], prefix); i++ {
		if e := c.entries[idx[i]]; idx[i] != prefix && e != nil && e.rec.Dirty {
			return true
		}
	}
	return false
}

// markLocalLocked adds name to the index of names that may have changes
// not yet uploaded. Every place that makes an entry dirty calls it;
// LocalNames drops names that are clean again.
func (c *Cache) markLocalLocked(name string) {
	i := sort.SearchStrings(c.localIdx, name)
	if i < len(c.localIdx) && c.localIdx[i] == name {
		return
	}
	c.localIdx = append(c.localIdx, "")
	copy(c.localIdx[i+1:], c.localIdx[i:])
	c.localIdx[i] = name
	c.localDirs.add(name)
}
