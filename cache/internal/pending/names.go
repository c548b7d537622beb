package pending

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Names is the index of the local overlay: the names that may have
// changes not yet in the bucket, sorted, and the directories of those
// names. Listings and lookups overlay what it names on the bucket's
// listing; it costs them a binary search and the names under a prefix,
// not a scan of every cached name. A name stays in it until Prune drops
// it: it may name a name whose changes are all sent (the owner decides,
// per name, whether it still counts). The zero Names is empty and ready
// to use. It has no lock: its owner guards it (see the package comment).
type Names struct {
	idx  []string // sorted, no name twice
	dirs dirs     // the directories of idx's names
}

// Add puts name in the index, if it is not there yet. Every change that
// makes a name's copy differ from the bucket's adds it, so that the
// overlay never misses a change.
func (n *Names) Add(name string) {
	i := sort.SearchStrings(n.idx, name)
	if i < len(n.idx) && n.idx[i] == name {
		return
	}
	n.idx = append(n.idx, "")
	copy(n.idx[i+1:], n.idx[i:])
	n.idx[i] = name
	n.dirs.add(name)
}

// Has reports whether name is in the index.
func (n *Names) Has(name string) bool {
	_, ok := slices.BinarySearch(n.idx, name)
	return ok
}

// Len is the number of names in the index.
func (n *Names) Len() int { return len(n.idx) }

// under is the range of idx that holds the names under prefix.
func (n *Names) under(prefix string) (start, end int) {
	start = sort.SearchStrings(n.idx, prefix)
	end = start
	for end < len(n.idx) && strings.HasPrefix(n.idx[end], prefix) {
		end++
	}
	return start, end
}

// Under yields the names under prefix (prefix itself among them, if it
// is one), in order. The caller changes nothing of n while it ranges
// over them.
func (n *Names) Under(prefix string) iter.Seq[string] {
	return func(yield func(string) bool) {
		idx := n.idx
		for i := sort.SearchStrings(idx, prefix); i < len(idx) && strings.HasPrefix(idx[i], prefix); i++ {
			if !yield(idx[i]) {
				return
			}
		}
	}
}

// Prune calls keep for each name under prefix, in order, once each, and
// drops from the index (and its directories) the names it returns false
// for: those whose changes are all sent, or whose copy is gone. keep only
// reads; it changes nothing of n.
func (n *Names) Prune(prefix string, keep func(name string) bool) {
	idx := n.idx
	start, end := n.under(prefix)
	kept := start
	var dropped []string
	for _, name := range idx[start:end] {
		if !keep(name) {
			dropped = append(dropped, name)
			continue
		}
		idx[kept] = name
		kept++
	}
	if kept < end {
		n.idx = append(idx[:kept], idx[end:]...)
		n.dirs.remove(dropped)
	}
}

// Subdirs yields the subdirectories of directory prefix ("" or a name
// ending with '/') that hold a name of the index: each as its full name
// (prefix, a segment, '/'), once, in order. A name's directories are the
// prefixes of it that end with '/' (the name itself, for a directory's
// placeholder). It costs a binary search per subdirectory, not a step
// per name directly in prefix nor per directory deeper down. The caller
// changes nothing of n while it ranges over them.
func (n *Names) Subdirs(prefix string) iter.Seq[string] {
	return func(yield func(string) bool) {
		dirs := n.dirs.idx
		for i := sort.SearchStrings(dirs, prefix); i < len(dirs) && strings.HasPrefix(dirs[i], prefix); {
			rest := dirs[i][len(prefix):]
			j := strings.IndexByte(rest, '/')
			if j < 0 {
				i++ // prefix itself
				continue
			}
			sub := dirs[i][:len(prefix)+j+1]
			if !yield(sub) {
				return
			}
			// Past the directories under sub: '0' is the byte after '/'.
			i += sort.SearchStrings(dirs[i:], sub[:len(sub)-1]+"0")
		}
	}
}

// Check reports the first invariant of n (see the package comment) that
// does not hold: the names sorted, none twice, and the directories
// exactly those of the names, each counted by the names it holds. It
// walks every name: for tests.
func (n *Names) Check() error {
	if !slices.IsSorted(n.idx) || len(slices.Compact(slices.Clone(n.idx))) != len(n.idx) {
		return fmt.Errorf("the local overlay's index is not sorted, or names a name twice")
	}
	var want dirs
	for _, name := range n.idx {
		want.add(name)
	}
	if !maps.Equal(want.count, n.dirs.count) {
		return fmt.Errorf("the local overlay's directories are counted %v, its names hold %v", n.dirs.count, want.count)
	}
	if !slices.Equal(want.idx, n.dirs.idx) {
		return fmt.Errorf("the local overlay's directories are indexed %q, its names hold %q", n.dirs.idx, want.idx)
	}
	return nil
}

// dirs indexes the directories of the names in Names, so that Subdirs
// finds a directory's subdirectories without stepping over the names
// directly in it: the kernel asks for a directory's attributes (its link
// count, from the subdirectories the overlay makes or removes) after
// every create in it, and a walk of the names made the creation of n
// files in one directory cost n*n steps (a third of the daemon's CPU at
// 12,000 new files, 2026-11-27). Each directory is counted by the names
// it holds.
type dirs struct {
	count map[string]int
	idx   []string // count's keys, sorted
}

// add counts name (just added to the names) in its directories.
func (d *dirs) add(name string) {
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

// remove uncounts names (just dropped from the names).
func (d *dirs) remove(names []string) {
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
