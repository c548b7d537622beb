package names

import (
	"sort"
	"sync"
	"time"
)

// Listing is one directory level, as listed from the bucket, with local
// changes shown over it when List returns it. It is never changed once
// made: readers hold it without Cache.mu.
//
// A confirmed upload changes one child of a cached listing, and a drain
// confirms thousands of files in one directory: copying the level for
// each would cost O(n) per file, O(n²) per directory. So listings made
// from one another by changes of single children (with) share a layer:
// a full set of children (base, never changed: compact records sorted by
// name, children.go) and an append-only log of the changes made over it
// since, each numbered. A listing is a layer and the number of changes
// it sees (ver): the changes appended after it was made are not its own.
// Appending to the log is O(1); when the log grows past a fraction of
// the base, the next listing starts a new layer with a full set (O(n log
// n) every n/8 changes: O(log n) amortized per change).
// Its sorted names are made once, on first use (readdir), not per change.
type Listing struct {
	lay  *layer
	ver  int // the changes of lay.log this listing sees: those numbered 1..ver
	n    int // how many children it has
	dirs int // how many of them are directories

	fetched time.Time // when the listing was asked for
	expires time.Time
	// hidden holds the files of the bucket that a directory of the same
	// name hides: shown if that directory is removed here while the
	// bucket still has objects under it (its old name after a rename).
	hidden map[string]Entry

	namesOnce sync.Once
	names     []string // sorted, made by Names
}

// layer is the shared state of the listings made from one full map of
// children. mu is a leaf lock: held only while reading or appending the
// log, never while calling out.
type layer struct {
	base *childSet // never changed once the layer is made (children.go)

	mu  sync.RWMutex
	log map[string][]change // guarded by mu: by name, in the order made
	tip int                 // guarded by mu: the number of the last change (and how many log holds)
}

// change is what a child became at change number ver (Kind None: removed).
type change struct {
	ver int
	e   Entry
}

// newListing returns a listing of children, which it takes: the caller
// must not change the map afterwards.
func newListing(children map[string]Entry, fetched, expires time.Time, hidden map[string]Entry) *Listing {
	dirs := 0
	for _, e := range children {
		if e.Kind == Dir {
			dirs++
		}
	}
	return &Listing{lay: &layer{base: newChildSet(children)}, n: len(children), dirs: dirs, fetched: fetched, expires: expires, hidden: hidden}
}

// newListingOf returns a listing of the children in set, which it takes
// (sorted by name, never changed afterwards).
func newListingOf(set *childSet, fetched, expires time.Time, hidden map[string]Entry) *Listing {
	dirs := 0
	for i := range set.recs {
		if set.recs[i].kind == Dir {
			dirs++
		}
	}
	return &Listing{lay: &layer{base: set}, n: len(set.recs), dirs: dirs, fetched: fetched, expires: expires, hidden: hidden}
}

// Names returns the names of the level, sorted. The caller must not
// change the slice.
func (l *Listing) Names() []string {
	l.namesOnce.Do(func() {
		if l.ver == 0 {
			l.names = l.lay.base.names() // sorted already
			return
		}
		names := make([]string, 0, l.n)
		l.each(func(seg string, _ Entry) { names = append(names, seg) })
		sort.Strings(names)
		l.names = names
	})
	return l.names
}

// Len returns how many children the level has.
func (l *Listing) Len() int { return l.n }

// Dirs returns how many children of the level are directories.
func (l *Listing) Dirs() int { return l.dirs }

// dirNames returns the names of the level's subdirectories, in order,
// at most limit. A listing made from a fetch (no changes over its base)
// is walked by its records' kinds, with no Entry made per child: it runs
// on every listing an application asks for (ahead.go).
func (l *Listing) dirNames(limit int) []string {
	var out []string
	if l.dirs == 0 {
		return nil
	}
	if l.ver == 0 {
		for i := range l.lay.base.recs {
			if r := &l.lay.base.recs[i]; r.kind == Dir {
				if out = append(out, r.seg); len(out) == limit {
					break
				}
			}
		}
		return out
	}
	for _, seg := range l.Names() {
		if l.Child(seg).Kind == Dir {
			if out = append(out, seg); len(out) == limit {
				break
			}
		}
	}
	return out
}

// Child returns what seg, a name of the level, is (Kind None if absent).
func (l *Listing) Child(seg string) Entry {
	if l.ver == 0 {
		e, _ := l.lay.base.get(seg)
		return e
	}
	l.lay.mu.RLock()
	cs := l.lay.log[seg]
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].ver <= l.ver {
			e := cs[i].e
			l.lay.mu.RUnlock()
			return e
		}
	}
	l.lay.mu.RUnlock()
	e, _ := l.lay.base.get(seg)
	return e
}

// each calls fn for every child of the level, in no order. It holds no
// lock while calling fn.
func (l *Listing) each(fn func(seg string, e Entry)) {
	changed := l.changed()
	l.lay.base.each(func(seg string, e Entry) {
		if _, ok := changed[seg]; !ok {
			fn(seg, e)
		}
	})
	for seg, e := range changed {
		if e.Kind != None {
			fn(seg, e)
		}
	}
}

// eachSorted calls fn for every child of the level, in order of their
// names. It holds no lock while calling fn.
func (l *Listing) eachSorted(fn func(seg string, e Entry)) {
	changed := l.changed()
	if len(changed) == 0 {
		l.lay.base.each(fn)
		return
	}
	segs := make([]string, 0, len(changed))
	for seg := range changed {
		segs = append(segs, seg)
	}
	sort.Strings(segs)
	next := func(upTo string, inclusive bool) {
		for len(segs) > 0 && (segs[0] < upTo || inclusive) {
			if e := changed[segs[0]]; e.Kind != None {
				fn(segs[0], e)
			}
			segs = segs[1:]
		}
	}
	l.lay.base.each(func(seg string, e Entry) {
		next(seg, false)
		if _, ok := changed[seg]; !ok {
			fn(seg, e)
		}
	})
	next("", true)
}

// changed returns the children this listing sees changed over its base
// (Kind None: removed), nil if none.
func (l *Listing) changed() map[string]Entry {
	if l.ver == 0 {
		return nil
	}
	out := map[string]Entry{}
	l.lay.mu.RLock()
	defer l.lay.mu.RUnlock()
	for seg, cs := range l.lay.log {
		for i := len(cs) - 1; i >= 0; i-- {
			if cs[i].ver <= l.ver {
				out[seg] = cs[i].e
				break
			}
		}
	}
	return out
}

// children returns the children of the level as a new map.
func (l *Listing) children() map[string]Entry { return l.copyChildren(0) }

// copyChildren returns a new map of the children of the level, with
// room for extra more.
func (l *Listing) copyChildren(extra int) map[string]Entry {
	out := make(map[string]Entry, l.n+extra)
	l.each(func(seg string, e Entry) { out[seg] = e })
	return out
}

// withHidden returns l with the files hidden behind its directories
// hidden instead: the same children, shared.
func (l *Listing) withHidden(hidden map[string]Entry) *Listing {
	return &Listing{lay: l.lay, ver: l.ver, n: l.n, dirs: l.dirs, fetched: l.fetched, expires: l.expires, hidden: hidden}
}

// with returns l with child seg made e (Kind None: removed), asked for
// and trusted as l. O(1) amortized: see Listing.
func (l *Listing) with(seg string, e Entry) *Listing {
	n, dirs := l.n, l.dirs
	switch l.Child(seg).Kind {
	case Dir:
		n, dirs = n-1, dirs-1
	case File:
		n--
	}
	switch e.Kind {
	case Dir:
		n, dirs = n+1, dirs+1
	case File:
		n++
	}
	out := &Listing{n: n, dirs: dirs, fetched: l.fetched, expires: l.expires, hidden: l.hidden}
	lay := l.lay
	lay.mu.Lock()
	// Only the newest listing of a layer may extend its log: another's
	// changes would be seen by the listings made after it.
	if lay.tip == l.ver && lay.tip < compactAfter(lay.base.len()) {
		if lay.log == nil {
			lay.log = map[string][]change{}
		}
		lay.tip++
		lay.log[seg] = append(lay.log[seg], change{ver: lay.tip, e: e})
		out.lay, out.ver = lay, lay.tip
		lay.mu.Unlock()
		return out
	}
	lay.mu.Unlock()
	children := l.copyChildren(1)
	if e.Kind == None {
		delete(children, seg)
	} else {
		children[seg] = e
	}
	out.lay = &layer{base: newChildSet(children)}
	return out
}

// compactAfter is how many changes a layer over a base of n children
// holds before the next change makes a new full map.
func compactAfter(n int) int { return 32 + n/8 }
