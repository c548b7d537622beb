package names

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// withLocal returns l with the local changes under prefix shown over it.
//
// The changes confirmed since l was asked for (recent) are read after the
// local copies: a change leaves the overlay only after it was confirmed,
// so a name that was local when LocalNames looked and is clean by the time
// Local looks at it is among them. Read before, such a name was in
// neither and the listing missed it.
func (m *Cache) withLocal(prefix string, l *Listing) *Listing {
	names, removed := m.local.LocalNames(prefix)
	type localFile struct {
		seg string
		a   transfer.ObjectAttrs
	}
	var dirs []string
	var files []localFile
	for _, name := range names {
		rest := name[len(prefix):]
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			dirs = append(dirs, rest[:i])
			continue
		}
		if a, ok := m.local.Local(name); ok {
			files = append(files, localFile{rest, a})
		}
	}
	m.mu.Lock()
	var newer map[string]recentChange // confirmed since the listing was asked for
	for seg, rc := range m.recent[prefix] {
		if !rc.at.Before(l.fetched) {
			if newer == nil {
				newer = map[string]recentChange{}
			}
			newer[seg] = rc
		}
	}
	m.mu.Unlock()
	if len(names) == 0 && len(removed) == 0 && len(newer) == 0 {
		return l
	}
	children := l.copyChildren(len(names))
	hidden := l.hidden // files behind a directory of the same name
	for seg, rc := range newer {
		c := rc.Entry
		switch {
		case rc.dirGone:
			if children[seg].Kind == Dir {
				delete(children, seg)
				if h := hidden[seg]; h.Kind == File {
					children[seg] = h // a file of the name shows now
				}
			}
		case children[seg].Kind == Dir:
			if c.Kind != Dir {
				hidden = maps.Clone(hidden)
				if hidden == nil {
					hidden = map[string]Entry{}
				}
				hidden[seg] = c // None: deleted since
			}
		case c.Kind == None:
			delete(children, seg)
		default:
			children[seg] = c
		}
	}
	for _, name := range removed {
		rest := name[len(prefix):]
		switch i := strings.IndexByte(rest, '/'); {
		case i < 0 && children[rest].Kind == File:
			delete(children, rest) // a deleted file
		case i == len(rest)-1 && children[rest[:i]].Kind == Dir:
			// A removed (empty) directory: a file of the same name in
			// the bucket shows now (made after the directory was
			// renamed away, while its objects are still being deleted).
			delete(children, rest[:i])
			if h := hidden[rest[:i]]; h.Kind == File && !slices.Contains(removed, prefix+rest[:i]) {
				children[rest[:i]] = h
			}
		}
	}
	for _, seg := range dirs {
		if ValidName(seg) {
			children[seg] = Entry{Kind: Dir}
		}
	}
	for _, f := range files {
		if ValidName(f.seg) && children[f.seg].Kind != Dir {
			children[f.seg] = Entry{Kind: File, Attrs: f.a}
		}
	}
	return newListing(children, l.fetched, l.expires, nil)
}

// List returns the directory level under prefix, from the cache while
// fresh, with the local changes shown over it. Objects whose names cannot
// be file names are left out and reported through warn.
//
// A change confirmed while the local changes are laid over the listing
// may have left the overlay after the listing was taken: Confirmed counts
// the change (and updates the cached listing) before the change leaves
// the overlay, so a count that moved meanwhile means "do it again".
func (m *Cache) List(ctx context.Context, prefix string, warn WarnFunc) (*Listing, error) {
	m.ensure(prefix)
	ctx, cancel := askContext(ctx)
	defer cancel()
	for try := 0; ; try++ {
		before := m.changeCount(prefix)
		l, err := m.listRemote(ctx, prefix, warn, false)
		if err != nil {
			return nil, err
		}
		out := m.withLocal(prefix, l)
		if try == 3 || m.changeCount(prefix) == before {
			m.listAhead(prefix, l, warn) // ahead.go
			return out, nil
		}
	}
}

func (m *Cache) changeCount(prefix string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changes[prefix]
}

// listRemote is List without the local changes. A listing during which a
// change of this cache was confirmed under prefix may miss it, and the
// change has left the local overlay: such a listing is made again (a few
// times at most). With fetch, the bucket is asked even if a listing is
// known (a refresh).
func (m *Cache) listRemote(ctx context.Context, prefix string, warn WarnFunc, fetch bool) (*Listing, error) {
	for try := 0; ; try++ {
		m.mu.Lock()
		before := m.stampLocked(prefix)
		m.mu.Unlock()
		l, err := m.listRemoteOnce(ctx, prefix, warn, before, fetch)
		if err != nil || l != nil || try == 3 {
			if l == nil && err == nil {
				l, err = m.listRemoteOnce(ctx, prefix, warn, anyStamp, fetch)
			}
			return l, err
		}
	}
}

// listRemoteOnce lists prefix (or takes the known listing, unless fetch:
// within the TTL, or past it refreshed in the background). It returns
// nil (and no error) if the stamp before no longer holds (stamp.go);
// anyStamp accepts the listing anyway.
func (m *Cache) listRemoteOnce(ctx context.Context, prefix string, warn WarnFunc, before stamp, fetch bool) (*Listing, error) {
	now := m.now()
	m.mu.Lock()
	l, ok := m.known.listing(prefix)
	trusted := ok && m.trustedLocked(l.fetched) // announcements are live (announce.go)
	m.mu.Unlock()
	if ok && !fetch && (trusted || now.Before(l.expires) || m.revalidate() && !unverified(l.expires)) {
		if !trusted && !now.Before(l.expires) {
			m.refreshListing(prefix, warn)
		}
		return l, nil
	}
	fl, err := m.fetchListing(ctx, prefix, warn, before, now)
	if err != nil && ok && !fetch && unverified(l.expires) {
		return l, nil // the bucket does not answer: what is known stands
	}
	return fl, err
}

// listParallel is how many pages of one long listing are asked for at
// once (transfer.ListAll).
const listParallel = 16

// fetchListing asks the bucket for the level under prefix, asked at
// now, and remembers it (see listRemoteOnce).
func (m *Cache) fetchListing(ctx context.Context, prefix string, warn WarnFunc, before stamp, now time.Time) (*Listing, error) {
	l, phs, err := m.fetchLevel(ctx, prefix, warn, nil)
	if err != nil {
		return nil, err
	}
	if !m.storeFetched(prefix, l, phs, before, now) {
		return nil, nil
	}
	return l, nil
}

// fetchLevel asks the bucket for the level under prefix. It returns the
// listing (its times not set) and the placeholder objects met: of prefix
// and of its subdirectories. With show, each child is shown to it as soon
// as the listing so far decides it, from the goroutine that called
// fetchLevel or from one of the listing's, one at a time (a levelCursor).
func (m *Cache) fetchLevel(ctx context.Context, prefix string, warn WarnFunc, show func(seg string, e Entry)) (*Listing, map[string]transfer.ObjectAttrs, error) {
	// The children go into compact records as the pages come (not into
	// a map of Entry, nor a slice of every page's objects first): the
	// level is held once, at about 90 bytes a child, while it is listed.
	set := &childSet{prefix: prefix}
	add := func(seg string, e Entry) {
		set.recs = append(set.recs, childRec{seg: seg})
		set.recs[len(set.recs)-1].set(prefix, e)
	}
	var cur *levelCursor
	if show != nil {
		cur = &levelCursor{prefix: prefix, show: show}
	}
	q := transfer.ListQuery{Prefix: prefix, Delimiter: "/", Placeholders: true}
	phs := map[string]transfer.ObjectAttrs{}
	// A long listing comes in name ranges at once (transfer.ListInOrder),
	// its pages in any order, each taken into records as it comes (a
	// span of them); a bucket that pages as GCS does then hands the
	// spans on in name order, for the cursor. A subdirectory a range
	// begins inside of is on two pages; sortHidingFiles keeps one.
	take := func(page transfer.ListPage) (recSpan, error) {
		from := len(set.recs)
		for _, p := range page.Prefixes {
			if p == transfer.StagingPrefix {
				continue // parts of uploads in flight (see fs's dirNode.reserved)
			}
			seg := strings.TrimSuffix(p[len(prefix):], "/")
			if !ValidName(seg) {
				warn(p, "objects hidden: their path has a segment that is not a valid file name (empty, '.', '..' or longer than 255 bytes)")
				continue
			}
			add(seg, Entry{Kind: Dir})
		}
		for _, a := range page.Objects {
			seg := a.Name[len(prefix):]
			switch {
			case seg == "" || strings.IndexByte(seg, '/') == len(seg)-1:
				// The directory's own placeholder object, or a
				// subdirectory's (listed with Placeholders).
				phs[a.Name] = a
			case !ValidName(seg):
				warn(a.Name, "object hidden: its name is not a valid file name (empty segment, '.', '..' or longer than 255 bytes)")
			default:
				add(seg, Entry{Kind: File, Attrs: a})
			}
		}
		return recSpan{from, len(set.recs)}, nil
	}
	inOrder := func(sp recSpan, ordered bool) error {
		if !ordered {
			cur = nil // all shown when the listing is whole (Stream)
		}
		cur.decide(set, sp)
		return nil
	}
	if err := transfer.ListInOrder(ctx, m.b, q, listParallel, take, inOrder); err != nil {
		return nil, nil, err
	}
	cur.finish()
	hidden := set.sortHidingFiles(func(seg string) {
		warn(prefix+seg, "object hidden: a directory has the same name", "shown_as", prefix+seg+"/")
	})
	return newListingOf(set, time.Time{}, time.Time{}, hidden), phs, nil
}

// storeFetched remembers l, the level under prefix fetched with the
// placeholders phs, as asked at now; it is not remembered, and false is
// returned, if the stamp before no longer holds (stamp.go).
func (m *Cache) storeFetched(prefix string, l *Listing, phs map[string]transfer.ObjectAttrs, before stamp, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.heldLocked(prefix, before) {
		return false // checked and stored under one lock: no change slips between
	}
	l.fetched = now
	// The listing says which of its directories have a placeholder.
	if prefix != "" {
		a, ok := phs[prefix]
		m.notePlaceholderLocked(prefix, a, ok, now)
	}
	for i := range l.lay.base.recs {
		if r := &l.lay.base.recs[i]; r.kind == Dir {
			a, ok := phs[prefix+r.seg+"/"]
			m.notePlaceholderLocked(prefix+r.seg+"/", a, ok, now)
		}
	}
	if m.ttl > 0 {
		l.expires = now.Add(m.ttl)
		m.noteListingNewsLocked(prefix, l)
		m.known.putFetchedListing(prefix, l)
	}
	return true
}

// noteListingNewsLocked notes the names whose answer l, just fetched,
// changes: against the listing known before and the entries asked for
// before it (which l now wins over, see knownLocked).
func (m *Cache) noteListingNewsLocked(prefix string, l *Listing) {
	if m.bg.onChange == nil {
		return
	}
	old, _ := m.known.listing(prefix)
	check := func(seg string) {
		c, _, _, ok := m.knownLocked(prefix + seg)
		if ok && differs(c, l.Child(seg)) {
			m.noteChangedLocked(prefix + seg)
		}
	}
	l.each(func(seg string, _ Entry) { check(seg) })
	if old != nil {
		old.each(func(seg string, _ Entry) {
			if l.Child(seg).Kind == None {
				check(seg)
			}
		})
	}
	if gr := m.known.group(prefix); gr != nil {
		for name := range gr.entries {
			if seg := name[len(prefix):]; l.Child(seg).Kind == None {
				check(seg)
			}
		}
	}
}

// Subdirs returns how many subdirectories directory prefix has, with the
// local changes shown over them, if its listing is known in memory (of
// any age, but not one to be checked again after a crash); false if it
// is not. It asks nobody and reads no file: the kernel asks for a
// directory's attributes after every create in it.
func (m *Cache) Subdirs(prefix string) (int, bool) {
	m.mu.Lock()
	l, ok := m.known.listing(prefix)
	m.mu.Unlock()
	if !ok || unverified(l.expires) {
		return 0, false
	}
	n := l.Dirs()
	present, removed := m.local.LocalSubdirs(prefix)
	for _, seg := range present {
		if ValidName(seg) && l.Child(seg).Kind != Dir {
			n++
		}
	}
	for _, seg := range removed {
		if l.Child(seg).Kind == Dir {
			n--
		}
	}
	return n, true
}

// subdirsOf is LocalSubdirs computed from LocalNames' answer, for
// overlays that have no index of their own (tests).
func subdirsOf(prefix string, names, removedNames []string) (present, removed []string) {
	made := map[string]bool{}
	for _, name := range names {
		rest := name[len(prefix):]
		if i := strings.IndexByte(rest, '/'); i >= 0 && !made[rest[:i]] {
			made[rest[:i]] = true
			present = append(present, rest[:i])
		}
	}
	for _, name := range removedNames {
		rest := name[len(prefix):]
		if i := strings.IndexByte(rest, '/'); i == len(rest)-1 && !made[rest[:i]] {
			removed = append(removed, rest[:i])
		}
	}
	return present, removed
}
