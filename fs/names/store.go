package names

import (
	"container/list"
	"strings"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// store is what the bucket said, by name: entries (what a full name is),
// listings (a directory level, by prefix) and placeholders (a directory's
// "dir/" object, by prefix), each with when the bucket was asked and
// until when it is trusted. Every method is called with Cache.mu held.
//
// It is kept by directory (group): a group holds the listing of one
// directory, the entries of the names in it and the placeholders of its
// subdirectories, which is what a lookup, a listing or a getattr in that
// directory reads. Groups are the unit of the working set: at most
// memNames names are held in memory, and the least recently used groups
// leave it first. With a disk (disk.go), every put and drop is also
// queued for names.db, and a group not in memory is loaded from it
// (Cache.ensure) before it is read; without one, a group that leaves
// memory is forgotten (it only costs a request).
//
// Values are never changed in place once put (a listing is replaced by
// a new one), so the store may hand out what it holds.
type store struct {
	groups   map[string]*group // by directory prefix ("" or ending in '/')
	lru      *list.List        // of *group, most recently used first
	names    int               // names held in memory, over all groups
	memNames int               // the bound on names
	disk     *disk             // nil: memory only
}

// group is what is known of one directory level.
type group struct {
	prefix       string
	listing      *Listing
	entries      map[string]cachedEntry // full name (no trailing '/')
	placeholders map[string]placeholder // prefix of a subdirectory (ending in '/')
	elem         *list.Element
}

// cachedEntry is an Entry as the bucket said it at asked.
type cachedEntry struct {
	Entry
	asked   time.Time // when the bucket was asked
	expires time.Time
}

// placeholder is what the bucket holds at a directory's "dir/" name.
type placeholder struct {
	a       transfer.ObjectAttrs
	exists  bool
	asked   time.Time // when the bucket was asked (or confirmed the change)
	expires time.Time
}

// defaultMemNames bounds the names held in memory (about 16 MiB of
// attributes for 100,000 files, measured in docs/bench.md). More stay in
// names.db, loaded by directory when used.
const defaultMemNames = 100_000

func newStore() store {
	return store{groups: map[string]*group{}, lru: list.New(), memNames: defaultMemNames}
}

// entryGroup, placeholderGroup: the group that holds an entry or a
// placeholder (a listing's group is its own prefix).
func entryGroup(name string) string         { return parentPrefix(name) }
func placeholderGroup(prefix string) string { return parentPrefix(strings.TrimSuffix(prefix, "/")) }

// resident says whether group g is in memory (or needs no loading).
func (s *store) resident(g string) bool {
	_, ok := s.groups[g]
	return ok || s.disk == nil
}

// group returns group g for reading, marking it used; nil if absent.
func (s *store) group(g string) *group {
	gr := s.groups[g]
	if gr != nil {
		s.lru.MoveToFront(gr.elem)
	}
	return gr
}

// groupForWrite returns group g, making an empty one if g is not held and
// there is nothing to load (no disk); nil if g is on disk and not loaded:
// the change then goes to disk only, and the next load finds it.
func (s *store) groupForWrite(g string) *group {
	if gr := s.group(g); gr != nil {
		return gr
	}
	if s.disk != nil {
		return nil
	}
	return s.addGroup(g)
}

// addGroup makes group g resident (empty) and keeps the working set
// within its bound.
func (s *store) addGroup(g string) *group {
	gr := &group{prefix: g, entries: map[string]cachedEntry{}, placeholders: map[string]placeholder{}}
	gr.elem = s.lru.PushFront(gr)
	s.groups[g] = gr
	s.trim()
	return gr
}

// insert makes gr, loaded from disk, resident.
func (s *store) insert(gr *group) {
	gr.elem = s.lru.PushFront(gr)
	s.groups[gr.prefix] = gr
	s.names += gr.size()
	s.trim()
}

// size is how many names gr holds.
func (gr *group) size() int {
	n := len(gr.entries) + len(gr.placeholders)
	if gr.listing != nil {
		n += 1 + gr.listing.Len()
	}
	return n
}

// trim drops the least recently used groups from memory while more than
// memNames names are held (never the most recent one).
func (s *store) trim() {
	for s.names > s.memNames && s.lru.Len() > 1 {
		gr := s.lru.Remove(s.lru.Back()).(*group)
		s.names -= gr.size()
		delete(s.groups, gr.prefix)
	}
}

// account changes the count of names by what a change of gr did.
func (s *store) account(gr *group, before int) {
	s.names += gr.size() - before
	s.trim()
}

func (s *store) entry(name string) (cachedEntry, bool) {
	if gr := s.group(entryGroup(name)); gr != nil {
		e, ok := gr.entries[name]
		return e, ok
	}
	return cachedEntry{}, false
}

func (s *store) putEntry(name string, e cachedEntry) {
	s.apply(op{kind: opEntry, key: name, entry: &e})
}

func (s *store) dropEntry(name string) { s.apply(op{kind: opEntry, key: name}) }

func (s *store) listing(prefix string) (*Listing, bool) {
	if gr := s.group(prefix); gr != nil && gr.listing != nil {
		return gr.listing, true
	}
	return nil, false
}

// putListing stores l, which must not change afterwards.
func (s *store) putListing(prefix string, l *Listing) {
	s.apply(op{kind: opListing, key: prefix, listing: l})
}

// putFetchedListing stores l, just fetched.
func (s *store) putFetchedListing(prefix string, l *Listing) { s.putListing(prefix, l) }

func (s *store) dropListing(prefix string) { s.apply(op{kind: opListing, key: prefix}) }

func (s *store) placeholder(prefix string) (placeholder, bool) {
	if gr := s.group(placeholderGroup(prefix)); gr != nil {
		p, ok := gr.placeholders[prefix]
		return p, ok
	}
	return placeholder{}, false
}

func (s *store) putPlaceholder(prefix string, p placeholder) {
	s.apply(op{kind: opPlaceholder, key: prefix, placeholder: &p})
}

// dropPlaceholdersUnder drops the placeholders of prefix and of the
// directories under it.
func (s *store) dropPlaceholdersUnder(prefix string) {
	s.apply(op{kind: opDropPlaceholdersUnder, key: prefix})
}

// dropUnder drops everything held of the names under prefix.
func (s *store) dropUnder(prefix string) { s.apply(op{kind: opDropUnder, key: prefix}) }

// apply makes change o in the groups in memory that it touches, and
// queues it for names.db. A put into a group on disk and not loaded
// goes to disk only: the group's next load finds it.
func (s *store) apply(o op) {
	if g, ok := o.group(); ok {
		gr := s.groups[g]
		if o.isPut() {
			gr = s.groupForWrite(g)
		}
		if gr != nil {
			n := gr.size()
			o.applyTo(gr)
			s.account(gr, n)
		}
	} else {
		for _, gr := range s.groups {
			if o.touches(gr.prefix) {
				n := gr.size()
				o.applyTo(gr)
				s.account(gr, n)
			}
		}
	}
	s.disk.queue(o)
}
