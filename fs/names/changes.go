package names

import (
	"maps"
	"strings"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// Forget drops what is remembered about name after a local change to it.
// Listings stay: local changes are shown over them on every use.
func (m *Cache) Forget(name string) {
	m.mu.Lock()
	m.known.dropEntry(name)
	m.mu.Unlock()
}

// Stale drops what is remembered of name, and the listing of its
// directory, which holds it too: the bucket has another version of it
// than the one they say.
func (m *Cache) Stale(name string) {
	parent := parentPrefix(name)
	m.mu.Lock()
	m.changes[parent]++ // a listing running now may predate the change
	m.known.dropEntry(name)
	m.known.dropListing(parent)
	m.mu.Unlock()
}

// ForgetUnder drops what is remembered about the names and listings
// under prefix (a directory renamed).
func (m *Cache) ForgetUnder(prefix string) {
	m.mu.Lock()
	m.forgetUnderLocked(prefix)
	m.mu.Unlock()
}

// DirMoved records that directory prefix from is now prefix to: the
// listings that hold either name are dropped, with what is remembered of
// the names. A bucket that renames folders did it in one step, with no
// local change to show over a listing that predates it.
func (m *Cache) DirMoved(from, to string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range []string{from, to} {
		full := strings.TrimSuffix(p, "/")
		parent := parentPrefix(full)
		m.changes[parent]++ // a listing running now may predate the move
		m.known.dropListing(parent)
		m.known.dropEntry(full)
		m.known.dropPlaceholdersUnder(p)
	}
}

// DirRenamed records that directory prefix from was renamed to prefix to
// here, in full (cache.RenameDir succeeded). What is remembered under
// both is dropped (as by ForgetUnder), and of the two names and their
// placeholders (as by DirMoved), but a known listing of either parent is
// kept, changed to say what the bucket says once the rename is there
// (from's name gone from its parent, to's a directory in its); and a
// known listing of from that holds directories only (no file, so no
// object version to follow) is to's now. So the listings and link counts
// of the parents, and of the directory moved, stay known: until the
// rename is in the bucket, its local changes are shown over them, as
// over any listing.
func (m *Cache) DirRenamed(from, to string) {
	fromFull, toFull := strings.TrimSuffix(from, "/"), strings.TrimSuffix(to, "/")
	fromParent, toParent := parentPrefix(fromFull), parentPrefix(toFull)
	m.ensure(from, to, fromParent, toParent)
	m.mu.Lock()
	defer m.mu.Unlock()
	moved, ok := m.known.listing(from)
	if !ok || unverified(moved.expires) || moved.Len() != moved.Dirs() || len(moved.hidden) > 0 {
		moved = nil
	}
	for _, p := range []string{from, to} {
		full := strings.TrimSuffix(p, "/")
		m.changes[parentPrefix(full)]++ // a listing running now may predate the rename
		m.changes[p]++
		m.forgetUnderLocked(p)
		m.known.dropEntry(full)
		m.known.dropPlaceholdersUnder(p)
		delete(m.recent, p) // what was confirmed there is of the names before the rename
	}
	// A confirmation under from before the rename noted from's name as a
	// directory of its parent (ancestorsExistLocked), newer than the
	// parent's listing kept below: it would bring the name back.
	delete(m.recent[fromParent], fromFull[len(fromParent):])
	if l, ok := m.known.listing(fromParent); ok && !unverified(l.expires) {
		seg := fromFull[len(fromParent):]
		gone := Entry{Kind: None}
		if h, ok := l.hidden[seg]; ok {
			gone = h // the file the directory hid shows now
		}
		m.known.putListing(fromParent, l.with(seg, gone))
	} else {
		m.known.dropListing(fromParent)
	}
	if l, ok := m.known.listing(toParent); ok && !unverified(l.expires) {
		seg := toFull[len(toParent):]
		m.known.putListing(toParent, l.with(seg, Entry{Kind: Dir}))
	} else {
		m.known.dropListing(toParent)
	}
	if moved != nil {
		m.known.putListing(to, newListing(moved.children(), moved.fetched, moved.expires, nil))
	}
}

// Confirmed records that a local change of name reached the bucket: the
// object a is there now, or (deleted) it is gone. The change then leaves
// the local overlay, so the cached listing of its directory must say what
// the bucket now says, or the name would vanish (or come back) until the
// TTL ends. Listings are replaced, never changed in place: readers hold
// them without the lock. It has the signature of cache.OnConfirmed's
// function, and takes no lock of the caller's.
func (m *Cache) Confirmed(name string, a transfer.ObjectAttrs, deleted bool) {
	full := strings.TrimSuffix(name, "/")
	if full == "" {
		return
	}
	isDir := full != name // a directory's placeholder
	parent := parentPrefix(full)
	seg := full[len(parent):]
	m.ensure(ancestors(parent)...)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.changes[parent]++ // even uncached: a listing running now may predate the change
	m.known.dropEntry(full)
	if isDir {
		m.notePlaceholderLocked(name, a, !deleted, m.now())
	}
	switch {
	case !isDir:
		m.noteRecentLocked(parent, seg, fileChange(a, deleted))
	case !deleted:
		// A listing or a lookup asked before has no directory there,
		// and the local overlay shows it no more (such an answer, used
		// as asked but not kept, is corrected with these).
		m.noteRecentLocked(parent, seg, recentChange{Entry: Entry{Kind: Dir}})
	default:
		m.noteRecentLocked(parent, seg, recentChange{dirGone: true})
	}
	if !deleted {
		m.ancestorsExistLocked(parent)
	}
	l, ok := m.known.listing(parent)
	if !ok {
		if !m.known.resident(parent) {
			m.known.dropListing(parent) // names.db's may predate the change
		}
		return
	}
	cur := l.Child(seg)
	var next Entry
	switch {
	case isDir && deleted:
		// The directory may live on through other objects under it: let
		// the bucket say.
		m.known.dropListing(parent)
		m.known.dropListing(name)
		return
	case isDir:
		next = Entry{Kind: Dir}
	case cur.Kind == Dir:
		// A directory of that name wins; the file stays hidden behind it.
		hidden := maps.Clone(l.hidden)
		if hidden == nil {
			hidden = map[string]Entry{}
		}
		if deleted {
			delete(hidden, seg)
		} else {
			hidden[seg] = Entry{Kind: File, Attrs: a}
		}
		m.known.putListing(parent, l.withHidden(hidden))
		return
	case deleted && cur.Kind != File:
		return
	case !deleted:
		next = Entry{Kind: File, Attrs: a}
	}
	// O(1) amortized (Listing.with): a drain of many files into one
	// directory must not copy its listing for each.
	m.known.putListing(parent, l.with(seg, next))
}

// ancestors returns dir and the directories above it, up to the root.
func ancestors(dir string) []string {
	out := []string{dir}
	for dir != "" {
		dir = parentPrefix(strings.TrimSuffix(dir, "/"))
		out = append(out, dir)
	}
	return out
}

// ancestorsExistLocked records that directory prefix dir and those above
// it exist in the bucket now (an object under them was confirmed): a
// listing of a level above asked for before may lack them, if they exist
// only through that object.
func (m *Cache) ancestorsExistLocked(dir string) {
	for dir != "" {
		up := parentPrefix(strings.TrimSuffix(dir, "/"))
		seg := dir[len(up) : len(dir)-1]
		// Not counted in m.changes: listings of every level above would
		// be fetched again for each upload below; recent corrects them.
		m.noteRecentLocked(up, seg, recentChange{Entry: Entry{Kind: Dir}})
		if !m.known.resident(up) {
			m.known.dropListing(up) // names.db's may predate the change
		}
		if l, ok := m.known.listing(up); ok && l.Child(seg).Kind != Dir {
			m.known.putListing(up, l.with(seg, Entry{Kind: Dir}))
		}
		dir = up
	}
}

// noteRecentLocked records rc, a confirmed change of name parent+seg,
// and forgets changes old enough that no answer predating them is used.
func (m *Cache) noteRecentLocked(parent, seg string, rc recentChange) {
	now := m.now()
	set := m.recent[parent]
	if set == nil {
		set = map[string]recentChange{}
		m.recent[parent] = set
	}
	rc.at = now
	set[seg] = rc
	if now.Sub(m.recentSwept) > m.recentFor()/2 {
		m.recentSwept = now
		old := now.Add(-m.recentFor())
		for p, set := range m.recent {
			for k, rc := range set {
				if rc.at.Before(old) {
					delete(set, k)
				}
			}
			if len(set) == 0 {
				delete(m.recent, p)
			}
		}
	}
}

// recentSinceLocked returns the confirmed change of name made at or
// after t, if any.
func (m *Cache) recentSinceLocked(name string, t time.Time) (recentChange, bool) {
	parent := parentPrefix(name)
	rc, ok := m.recent[parent][name[len(parent):]]
	if !ok || rc.at.Before(t) {
		return recentChange{}, false
	}
	return rc, true
}

// fileChange is the recent change of a file confirmed as a (or deleted).
func fileChange(a transfer.ObjectAttrs, deleted bool) recentChange {
	if deleted {
		return recentChange{Entry: Entry{Kind: None}}
	}
	return recentChange{Entry: Entry{Kind: File, Attrs: a}}
}

// MadeEmpty records that the directory prefix was just made here and is
// empty in the bucket, so that looking up new names in it needs no request
// for the TTL.
func (m *Cache) MadeEmpty(prefix string) {
	if m.ttl <= 0 {
		return
	}
	// Resident, so that the listing is held in memory, where Subdirs
	// (the link count the kernel asks for next) looks: put into a group
	// not loaded, it would go to names.db only.
	m.ensure(prefix)
	m.mu.Lock()
	now := m.now()
	m.known.putListing(prefix, newListing(map[string]Entry{}, now, now.Add(m.ttl), nil))
	m.mu.Unlock()
}

// notePlaceholderLocked records what the bucket said, at asked, of the
// placeholder of directory prefix: a, or none (exists false). An older
// answer than the one held is dropped.
func (m *Cache) notePlaceholderLocked(prefix string, a transfer.ObjectAttrs, exists bool, asked time.Time) {
	if m.ttl <= 0 {
		return
	}
	if cur, ok := m.known.placeholder(prefix); ok && cur.asked.After(asked) {
		return
	}
	if !exists {
		a = transfer.ObjectAttrs{} // what a deletion was confirmed of is gone
	}
	m.known.putPlaceholder(prefix, placeholder{a: a, exists: exists, asked: asked, expires: asked.Add(m.ttl)})
}
