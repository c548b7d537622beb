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
	for _, name := range idx[start:end] {
		e := c.entries[name]
		if e == nil || !e.rec.Dirty {
			continue // clean or gone since: dropped from the index below
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
	}
	return present, removed
}

// LocalSubdirs returns the subdirectories of directory prefix (their
// names in it) that changes not yet in the bucket make or remove: present,
// those holding a name written here; removed, those holding none whose
// placeholder ("prefix/seg/") was deleted here. A directory's link count
// comes from it (fs), and the kernel asks for that after every create in
// the directory: it costs a binary search, a step per name directly in
// prefix, and one more search per subdirectory, whatever is under them
// (but the deletions, when every name under a subdirectory is deleted).
func (c *Cache) LocalSubdirs(prefix string) (present, removed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	idx := c.localIdx
	for i := sort.SearchStrings(idx, prefix); i < len(idx) && strings.HasPrefix(idx[i], prefix); {
		rest := idx[i][len(prefix):]
		j := strings.IndexByte(rest, '/')
		if j < 0 {
			i++ // a name directly in prefix
			continue
		}
		sub := idx[i][:len(prefix)+j+1]
		// Past the names under sub: '0' is the byte after '/'.
		end := i + sort.SearchStrings(idx[i:], sub[:len(sub)-1]+"0")
		made, gone := false, false
		for _, name := range idx[i:end] {
			e := c.entries[name]
			switch {
			case e == nil || !e.rec.Dirty:
			case !e.rec.Deleted:
				made = true
			case name == sub:
				gone = true
			}
			if made {
				break
			}
		}
		if made {
			present = append(present, rest[:j])
		} else if gone {
			removed = append(removed, rest[:j])
		}
		i = end
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
}
