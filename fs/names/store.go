package names

import (
	"strings"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// store is what the bucket said, by name: entries (what a full name is),
// listings (a directory level, by prefix) and placeholders (a directory's
// "dir/" object, by prefix), each with when the bucket was asked and
// until when it is trusted. Every method is called with Cache.mu held.
//
// It is all a persistent cache would keep: the rest of Cache is about
// answers in flight. A store on disk replaces this one and nothing else;
// its values are never changed in place once put (a listing is replaced
// by a new one), so it may hand out what it holds.
type store struct {
	entries      map[string]cachedEntry // full name (no trailing '/')
	listings     map[string]*Listing    // prefix ("" or ending in '/')
	placeholders map[string]placeholder // prefix (ending in '/')
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

// sweepLimit bounds how many entries pile up before expired ones are dropped.
const sweepLimit = 1 << 16

func newStore() store {
	return store{entries: map[string]cachedEntry{}, listings: map[string]*Listing{}, placeholders: map[string]placeholder{}}
}

func (s *store) entry(name string) (cachedEntry, bool) {
	e, ok := s.entries[name]
	return e, ok
}

// putEntry stores e, first dropping the expired entries if there are
// many.
func (s *store) putEntry(name string, e cachedEntry) {
	if len(s.entries) > sweepLimit {
		for k, v := range s.entries {
			if !e.asked.Before(v.expires) {
				delete(s.entries, k)
			}
		}
	}
	s.entries[name] = e
}

func (s *store) dropEntry(name string) { delete(s.entries, name) }

func (s *store) listing(prefix string) (*Listing, bool) {
	l, ok := s.listings[prefix]
	return l, ok
}

// putListing stores l, which must not change afterwards.
func (s *store) putListing(prefix string, l *Listing) { s.listings[prefix] = l }

// putFetchedListing stores l, just fetched, first dropping the expired
// listings if there are many.
func (s *store) putFetchedListing(prefix string, l *Listing) {
	if len(s.listings) > sweepLimit/64 {
		for k, v := range s.listings {
			if !l.fetched.Before(v.expires) {
				delete(s.listings, k)
			}
		}
	}
	s.listings[prefix] = l
}

func (s *store) dropListing(prefix string) { delete(s.listings, prefix) }

func (s *store) placeholder(prefix string) (placeholder, bool) {
	p, ok := s.placeholders[prefix]
	return p, ok
}

// putPlaceholder stores p, first dropping the expired placeholders if
// there are many.
func (s *store) putPlaceholder(prefix string, p placeholder) {
	if len(s.placeholders) > sweepLimit {
		for k, v := range s.placeholders {
			if !p.asked.Before(v.expires) {
				delete(s.placeholders, k)
			}
		}
	}
	s.placeholders[prefix] = p
}

// dropPlaceholdersUnder drops the placeholders of prefix and of the
// directories under it.
func (s *store) dropPlaceholdersUnder(prefix string) {
	for k := range s.placeholders {
		if strings.HasPrefix(k, prefix) {
			delete(s.placeholders, k)
		}
	}
}

// dropUnder drops everything held of the names under prefix.
func (s *store) dropUnder(prefix string) {
	for k := range s.entries {
		if strings.HasPrefix(k, prefix) {
			delete(s.entries, k)
		}
	}
	for k := range s.listings {
		if strings.HasPrefix(k, prefix) {
			delete(s.listings, k)
		}
	}
	s.dropPlaceholdersUnder(prefix)
}
