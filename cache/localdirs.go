package cache

import (
	"slices"
	"sort"
	"strings"
)

// localDirs indexes the directories of the names in Cache.localIdx, so
// that LocalSubdirs finds a directory's subdirectories without stepping
// over the names directly in it: the kernel asks for a directory's
// attributes (its link count, from LocalSubdirs) after every create in
// it, and a walk of the names made the creation of n files in one
// directory cost n*n steps (a third of the daemon's CPU at 12,000 new
// files, 2026-11-27). A directory of a name is every prefix of it that
// ends with '/', the name itself for a directory's placeholder. Each is
// counted by the names it holds; the index may hold a directory whose
// names are all clean again until LocalNames drops them (LocalSubdirs
// checks the names). Guarded by Cache.mu.
type localDirs struct {
	count map[string]int
	idx   []string // count's keys, sorted
}

// add counts name (just added to localIdx) in its directories.
func (d *localDirs) add(name string) {
	if d.count == nil {
		d.count = map[string]int{}
	}
	for i := 0; i < len(name); i++ {
		if name[i] != '/' {
			continue
		}
		dir := name[:i+1]
		d.count[dir]++
		if d.count[dir] == 1 {
			j := sort.SearchStrings(d.idx, dir)
			d.idx = slices.Insert(d.idx, j, dir)
		}
	}
}

// remove uncounts names (just dropped from localIdx).
func (d *localDirs) remove(names []string) {
	emptied := false
	for _, name := range names {
		for i := 0; i < len(name); i++ {
			if name[i] != '/' {
				continue
			}
			dir := name[:i+1]
			if d.count[dir]--; d.count[dir] <= 0 {
				delete(d.count, dir)
				emptied = true
			}
		}
	}
	if emptied {
		d.idx = slices.DeleteFunc(d.idx, func(dir string) bool { _, ok := d.count[dir]; return !ok })
	}
}

// LocalSubdirs returns the subdirectories of directory prefix (their
// names in it) that changes not yet in the bucket make or remove: present,
// those holding a name written here; removed, those holding none whose
// placeholder ("prefix/seg/") was deleted here. A directory's link count
// comes from it (fs), and the kernel asks for that after every create in
// the directory: it costs a binary search per subdirectory in localDirs,
// and the names under each until one is written here (all of them, when
// every name under a subdirectory is deleted), not the names directly in
// prefix.
func (c *Cache) LocalSubdirs(prefix string) (present, removed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dirs := c.localDirs.idx
	for i := sort.SearchStrings(dirs, prefix); i < len(dirs) && strings.HasPrefix(dirs[i], prefix); {
		rest := dirs[i][len(prefix):]
		j := strings.IndexByte(rest, '/')
		if j < 0 {
			i++ // prefix itself
			continue
		}
		sub := dirs[i][:len(prefix)+j+1]
		made, gone := c.subdirChangeLocked(sub)
		if made {
			present = append(present, rest[:j])
		} else if gone {
			removed = append(removed, rest[:j])
		}
		// Past the directories under sub: '0' is the byte after '/'.
		i += sort.SearchStrings(dirs[i:], sub[:len(sub)-1]+"0")
	}
	return present, removed
}

// subdirChangeLocked reports whether a name under directory sub is
// written here (made), or else whether its placeholder is deleted here
// (gone).
func (c *Cache) subdirChangeLocked(sub string) (made, gone bool) {
	idx := c.localIdx
	for i := sort.SearchStrings(idx, sub); i < len(idx) && strings.HasPrefix(idx[i], sub); i++ {
		e := c.entries[idx[i]]
		switch {
		case e == nil || !e.rec.Dirty:
		case !e.rec.Deleted:
			return true, false
		case idx[i] == sub:
			gone = true
		}
	}
	return false, gone
}
