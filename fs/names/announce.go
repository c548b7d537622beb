package names

import (
	"maps"
	"strings"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// Changes announced by the bucket (GCS's Pub/Sub notifications, package
// internal/notify): another writer's upload, metadata change or deletion
// of a name, applied to what is known without asking the bucket. While
// announcements are live (Trust), what is known is trusted past the TTL:
// every change made since the announcements started reaches it.
//
// Announcements come at least once and in no order. Each is applied by
// generation: one older than what is known of the name is dropped, a
// deletion of generation G is final for G (a late announcement of G's
// upload does not bring it back: gone remembers it), and a duplicate
// changes nothing.

// goneMax bounds the deletions remembered (gone); past it, the oldest
// half is forgotten. A late upload announcement of a generation whose
// deletion was forgotten would show it again, until its next
// announcement or the TTL.
const goneMax = 1 << 16

// Announcement is a change of one object that the bucket announced.
type Announcement struct {
	// Object is the version the change is about (Name and Generation
	// at least; with the announcement's payload, all its attributes).
	Object transfer.ObjectAttrs
	// Deleted: that version is gone (deleted, or replaced: archived).
	Deleted bool
	// Full: Object holds all the version's attributes (a JSON_API_V1
	// payload), not only its name and generation.
	Full bool
	// Meta: a change of the version's metadata (OBJECT_METADATA_UPDATE),
	// not a new version.
	Meta bool
}

// Outcome is what Announce did with an announcement.
type Outcome int

const (
	Applied   Outcome = iota // what is known changed
	Stale                    // older than what is known: dropped
	Duplicate                // what is known already
)

// Announce applies an announced change of an object: an upload or a
// metadata change (the version is there now) or a deletion. What is known
// of the name, the listing of its directory and the directories above it
// (an implicit directory that comes or goes with its objects) change to
// match; the name is noted changed (OnChange: the kernel drops what it
// holds). An upload announced without its attributes (Full false) drops
// what is known of the name instead: it is asked again on its next use.
func (m *Cache) Announce(an Announcement) Outcome {
	name := an.Object.Name
	full := strings.TrimSuffix(name, "/")
	if full == "" {
		return Duplicate
	}
	isDir := full != name
	parent := parentPrefix(full)
	seg := full[len(parent):]
	m.ensure(ancestors(parent)...)
	m.mu.Lock()
	defer m.mu.Unlock()
	gen, mgen := an.Object.Generation, an.Object.Metageneration
	if g, ok := m.gone[name]; ok && gen <= g {
		if an.Deleted && gen == g {
			return Duplicate
		}
		return Stale // deleted already: final for that version
	}
	cur, _, _, known := m.knownLocked(full)
	if isDir {
		p, ok := m.known.placeholder(name)
		cur, known = Entry{}, ok && p.exists
		if known {
			cur = Entry{Kind: File, Attrs: p.a}
		}
	}
	if known && cur.Kind == File {
		cg, cm := cur.Attrs.Generation, cur.Attrs.Metageneration
		same := cg == gen && !an.Deleted
		switch {
		case cg > gen, same && an.Full && mgen < cm:
			return Stale
		case same && an.Full && mgen == cm && sameAttrs(cur.Attrs, an.Object), same && !an.Full && !an.Meta:
			// (Compared, not only counted: a store that keeps the
			// metageneration at 1, as the emulator's fake does, still
			// changes the metadata.)
			return Duplicate
		}
	}
	if an.Deleted {
		// Remembered, so that the upload of that version, announced
		// late, is dropped.
		m.rememberGoneLocked(name, gen)
	}
	m.changes[parent]++ // a listing running now may predate the change
	m.known.dropEntry(full)
	now := m.now()
	if isDir {
		m.notePlaceholderLocked(name, an.Object, !an.Deleted, now)
		m.announceDirLocked(parent, seg, full, an.Deleted)
		m.noteChangedLocked(full)
		return Applied
	}
	if !an.Full && !an.Deleted {
		m.known.dropListing(parent) // asked again on the next use
		m.noteChangedLocked(full)
		return Applied
	}
	m.noteRecentLocked(parent, seg, fileChange(an.Object, an.Deleted))
	if !an.Deleted {
		m.ancestorsExistLocked(parent)
	}
	if l, ok := m.known.listing(parent); ok {
		switch c := l.Child(seg); {
		case c.Kind == Dir:
			// A directory of that name wins; the file stays hidden behind it.
			hidden := map[string]Entry{}
			for k, v := range l.hidden {
				hidden[k] = v
			}
			if an.Deleted {
				delete(hidden, seg)
			} else {
				hidden[seg] = Entry{Kind: File, Attrs: an.Object}
			}
			m.known.putListing(parent, l.withHidden(hidden))
		case an.Deleted:
			m.known.putListing(parent, l.with(seg, Entry{Kind: None}))
			m.vanishIfEmptyLocked(parent)
		default:
			m.known.putListing(parent, l.with(seg, Entry{Kind: File, Attrs: an.Object}))
		}
	} else {
		if !m.known.resident(parent) {
			m.known.dropListing(parent) // names.db's may predate the change
		}
		if an.Deleted {
			m.maybeVanishedLocked(parent)
		}
	}
	m.noteChangedLocked(full)
	return Applied
}

// maybeVanishedLocked is told that an object of directory dir, whose
// listing is not known, was deleted: dir may have gone with it (an
// implicit directory), and so may those above it. The listings above
// that may show them are dropped (asked again on their next use), up to
// a directory whose placeholder is known to exist.
func (m *Cache) maybeVanishedLocked(dir string) {
	for dir != "" {
		if p, ok := m.known.placeholder(dir); ok && p.exists {
			return
		}
		up := parentPrefix(strings.TrimSuffix(dir, "/"))
		delete(m.recent[up], dir[len(up):len(dir)-1]) // may be gone: the bucket says on the next listing
		m.known.dropListing(up)
		m.known.dropEntry(strings.TrimSuffix(dir, "/"))
		m.noteChangedLocked(strings.TrimSuffix(dir, "/"))
		dir = up
	}
}

// announceDirLocked applies the upload or deletion of the placeholder of
// directory full (seg in parent).
func (m *Cache) announceDirLocked(parent, seg, full string, deleted bool) {
	if !deleted {
		m.ancestorsExistLocked(parent)
		if l, ok := m.known.listing(parent); ok && l.Child(seg).Kind != Dir {
			m.known.putListing(parent, l.with(seg, Entry{Kind: Dir}))
		}
		return
	}
	// The directory may live on through other objects under it.
	if l, ok := m.known.listing(full + "/"); ok && l.Len() > 0 {
		return
	}
	m.known.dropListing(parent)
	m.known.dropListing(full + "/")
}

// vanishIfEmptyLocked takes directory prefix dir out of the listing above
// it if the deletion just applied emptied it and it has no placeholder:
// an implicit directory goes with its last object. If that cannot be
// told from what is known, the listing above is dropped (asked again).
func (m *Cache) vanishIfEmptyLocked(dir string) {
	for dir != "" {
		l, ok := m.known.listing(dir)
		if !ok || l.Len() > 0 {
			return
		}
		up := parentPrefix(strings.TrimSuffix(dir, "/"))
		seg := dir[len(up) : len(dir)-1]
		p, pok := m.known.placeholder(dir)
		if pok && p.exists {
			return // an empty directory with its placeholder stays
		}
		delete(m.recent[up], seg) // a directory noted existing (ancestorsExistLocked) is gone
		ul, uok := m.known.listing(up)
		if !pok || !uok {
			m.known.dropListing(up)
			m.noteChangedLocked(strings.TrimSuffix(dir, "/"))
			return
		}
		m.known.putListing(up, ul.with(seg, Entry{Kind: None}))
		m.noteChangedLocked(strings.TrimSuffix(dir, "/"))
		dir = up
	}
}

// rememberGoneLocked remembers that generation gen of name is deleted.
func (m *Cache) rememberGoneLocked(name string, gen int64) {
	if gen <= m.gone[name] {
		return
	}
	if len(m.gone) >= goneMax {
		n := 0
		for k := range m.gone { // map order: about half, at random
			if n++; n > goneMax/2 {
				break
			}
			delete(m.gone, k)
		}
	}
	m.gone[name] = gen
}

// Trust says whether announcements are live (on) and, if so, since when:
// an answer the bucket gave at or after since is trusted past the TTL,
// since every change after it is announced. Off, answers are trusted
// for the TTL again, at once. A stream that came back after a break
// passes the time it came back: what was known before it is asked again
// in the background on its next use (stale-while-revalidate), since
// announcements were lost meanwhile.
func (m *Cache) Trust(on bool, since time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !on {
		m.trustFrom = time.Time{}
		return
	}
	m.trustFrom = since
}

// trustedLocked says whether an answer asked at asked is trusted past the
// TTL (Trust).
func (m *Cache) trustedLocked(asked time.Time) bool {
	return !m.trustFrom.IsZero() && !asked.IsZero() && !asked.Before(m.trustFrom)
}

// farFuture stands for "no expiry" while announcements are trusted.
var farFuture = time.Unix(1<<62, 0)

// sameAttrs reports whether a and b say the same of one version: its
// custom metadata, time and content type and encoding.
func sameAttrs(a, b transfer.ObjectAttrs) bool {
	return maps.Equal(a.Metadata, b.Metadata) && a.Updated.Equal(b.Updated) && a.ContentType == b.ContentType &&
		a.ContentEncoding == b.ContentEncoding && a.Size == b.Size
}
