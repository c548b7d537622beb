package names

import "strings"

// op is one change of the store: a put or a drop of an entry, a listing
// or a placeholder, or a drop of everything (or of the placeholders)
// under a prefix. The store applies it to the groups in memory and
// queues it for names.db, and a group loaded from names.db applies the
// ops not yet written there (disk.go), so that one op means the same in
// both places.
type op struct {
	kind        opKind
	key         string       // a full name, a listing's prefix, a placeholder's prefix
	entry       *cachedEntry // the value put (nil: a drop)
	listing     *Listing
	placeholder *placeholder
}

type opKind uint8

const (
	opEntry opKind = iota + 1
	opListing
	opPlaceholder
	opDropPlaceholdersUnder
	opDropUnder
	opTouch // marks a group used (names.db's eviction order); no change
)

// group returns the one group a point op changes (ok false for the ops
// on a prefix, which may change many).
func (o op) group() (string, bool) {
	switch o.kind {
	case opEntry:
		return entryGroup(o.key), true
	case opListing, opTouch:
		return o.key, true
	case opPlaceholder:
		return placeholderGroup(o.key), true
	}
	return "", false
}

// isPut says whether o adds something (a group may be made for it).
func (o op) isPut() bool {
	return o.entry != nil || o.listing != nil || o.placeholder != nil
}

// touches says whether o may change group g.
func (o op) touches(g string) bool {
	if pg, ok := o.group(); ok {
		return pg == g
	}
	return strings.HasPrefix(g, o.key) || g == placeholderGroup(o.key)
}

// applyTo makes the change of o in gr, which it touches.
func (o op) applyTo(gr *group) {
	switch o.kind {
	case opEntry:
		if o.entry != nil {
			gr.entries[o.key] = *o.entry
		} else {
			delete(gr.entries, o.key)
		}
	case opListing:
		gr.listing = o.listing
	case opPlaceholder:
		if o.placeholder != nil {
			gr.placeholders[o.key] = *o.placeholder
		} else {
			delete(gr.placeholders, o.key)
		}
	case opDropUnder:
		if strings.HasPrefix(gr.prefix, o.key) {
			gr.listing = nil
			clear(gr.entries)
			clear(gr.placeholders)
			return
		}
		fallthrough
	case opDropPlaceholdersUnder:
		for k := range gr.placeholders {
			if strings.HasPrefix(k, o.key) {
				delete(gr.placeholders, k)
			}
		}
	}
}
