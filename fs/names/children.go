package names

import (
	"sort"
	"strings"
	"time"
)

// childSet is the base of a listing's layer: its children sorted by
// name, each in a compact record. A map of Entry costs about 190 bytes a
// child (the attributes' full struct, the map's slots); a record holds
// what a listing's children have, about 90 bytes, and the rare parts
// (content type and encoding, custom metadata, an object name that is
// not the directory's prefix and the child's name) behind a pointer. An
// Entry is made again on each read (Entry: a string concatenation for
// the object name). Never changed once made.
type childSet struct {
	prefix string // a child's object name is prefix+seg unless it keeps its own
	recs   []childRec
}

type childRec struct {
	seg     string
	size    int64
	gen     int64
	metagen int64
	updated int64 // UnixNano, if flags&recUpdated
	md5     []byte
	extra   *childExtra
	crc     uint32
	kind    Kind
	flags   uint8
}

// childExtra holds what few children have.
type childExtra struct {
	name            string // the object name, when it is not prefix+seg
	contentType     string
	contentEncoding string
	metadata        map[string]string
	updated         time.Time // when UnixNano cannot hold it
}

const (
	recStale   = 1 << iota // Entry.Stale
	recAttrs               // Entry.Attrs is not the zero value
	recUpdated             // updated holds Attrs.Updated (else zero, or in extra)
)

// newChildSet makes the set of children, and finds the prefix of their
// object names.
func newChildSet(children map[string]Entry) *childSet {
	s := &childSet{recs: make([]childRec, 0, len(children))}
	for seg, e := range children {
		if e.Attrs.Name != "" && s.prefix == "" {
			if p, ok := strings.CutSuffix(e.Attrs.Name, seg); ok {
				s.prefix = p
			}
		}
		s.recs = append(s.recs, childRec{seg: seg})
	}
	sort.Slice(s.recs, func(i, j int) bool { return s.recs[i].seg < s.recs[j].seg })
	for i := range s.recs {
		s.recs[i].set(s.prefix, children[s.recs[i].seg])
	}
	return s
}

// sortHidingFiles sorts s's records (made in any order) by name, and
// takes out the files that have the name of a directory of the level (a
// bucket may hold "a" and "a/x"): the directory wins, and the files are
// returned (nil if none), each told to hidden first. A directory made
// twice (its prefix on two pages of a listing cut into ranges) is kept
// once.
func (s *childSet) sortHidingFiles(hide func(seg string)) map[string]Entry {
	sort.SliceStable(s.recs, func(i, j int) bool {
		a, b := &s.recs[i], &s.recs[j]
		return a.seg < b.seg || a.seg == b.seg && a.kind == Dir && b.kind != Dir
	})
	var hidden map[string]Entry
	out := s.recs[:0]
	for i := range s.recs {
		r := s.recs[i]
		if len(out) > 0 && out[len(out)-1].seg == r.seg && r.kind == Dir {
			continue // a directory met twice (on two pages of a listing)
		}
		if len(out) > 0 && out[len(out)-1].seg == r.seg {
			// After its directory (sorted first): a file of that name.
			if hidden == nil {
				hidden = map[string]Entry{}
			}
			hide(r.seg)
			hidden[r.seg] = s.entry(&r)
			continue
		}
		out = append(out, r)
	}
	clear(s.recs[len(out):]) // no strings held past the end
	s.recs = out
	return hidden
}

// set fills r from e.
func (r *childRec) set(prefix string, e Entry) {
	a := e.Attrs
	r.kind = e.Kind
	if e.Stale {
		r.flags |= recStale
	}
	if a.Name == "" && a.Size == 0 && a.Generation == 0 && a.Metageneration == 0 && a.Updated.IsZero() &&
		a.ContentType == "" && a.ContentEncoding == "" && a.Metadata == nil && a.CRC32C == 0 && a.MD5 == nil {
		return
	}
	r.flags |= recAttrs
	r.size, r.gen, r.metagen, r.crc, r.md5 = a.Size, a.Generation, a.Metageneration, a.CRC32C, a.MD5
	var x childExtra
	if a.Name != prefix+r.seg {
		x.name = a.Name
	}
	x.contentType, x.contentEncoding, x.metadata = a.ContentType, a.ContentEncoding, a.Metadata
	switch {
	case a.Updated.IsZero():
	case a.Updated.Equal(time.Unix(0, a.Updated.UnixNano())) && a.Updated.Location() == time.UTC:
		r.updated = a.Updated.UnixNano()
		r.flags |= recUpdated
	default:
		x.updated = a.Updated // outside UnixNano's years, or not in UTC: kept as it is
	}
	if x.name != "" || x.contentType != "" || x.contentEncoding != "" || x.metadata != nil || !x.updated.IsZero() {
		r.extra = &x
	}
}

// entry makes r's Entry again.
func (s *childSet) entry(r *childRec) Entry {
	e := Entry{Kind: r.kind, Stale: r.flags&recStale != 0}
	if r.flags&recAttrs == 0 {
		return e
	}
	a := &e.Attrs
	a.Size, a.Generation, a.Metageneration, a.CRC32C, a.MD5 = r.size, r.gen, r.metagen, r.crc, r.md5
	if r.flags&recUpdated != 0 {
		a.Updated = time.Unix(0, r.updated).UTC()
	}
	if x := r.extra; x != nil {
		a.ContentType, a.ContentEncoding, a.Metadata = x.contentType, x.contentEncoding, x.metadata
		if !x.updated.IsZero() {
			a.Updated = x.updated
		}
		a.Name = x.name
	}
	if a.Name == "" {
		a.Name = s.prefix + r.seg
	}
	return e
}

// get returns the child seg.
func (s *childSet) get(seg string) (Entry, bool) {
	i := sort.Search(len(s.recs), func(i int) bool { return s.recs[i].seg >= seg })
	if i < len(s.recs) && s.recs[i].seg == seg {
		return s.entry(&s.recs[i]), true
	}
	return Entry{}, false
}

func (s *childSet) len() int { return len(s.recs) }

// each calls fn for every child, in order of their names.
func (s *childSet) each(fn func(seg string, e Entry)) {
	for i := range s.recs {
		fn(s.recs[i].seg, s.entry(&s.recs[i]))
	}
}

// names returns the children's names, sorted.
func (s *childSet) names() []string {
	out := make([]string, len(s.recs))
	for i := range s.recs {
		out[i] = s.recs[i].seg
	}
	return out
}
