package names

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// resolveLocal says what name is from local changes alone, if they
// decide (ok). dirGone says that they decide only that name is no
// directory (one removed here, whose objects may still be in the bucket).
func (m *Cache) resolveLocal(name string) (c Entry, ok, dirGone bool) {
	if a, ok := m.local.Local(name); ok {
		return Entry{Kind: File, Attrs: a}, true, false
	}
	if present, _ := m.local.LocalNames(name + "/"); len(present) > 0 {
		return Entry{Kind: Dir}, true, false
	}
	_, removed := m.local.LocalNames(name)
	if slices.Contains(removed, name) {
		return Entry{Kind: None}, true, false // a file deleted here
	}
	if slices.Contains(removed, name+"/") {
		// A directory removed here (or renamed away): its placeholder
		// goes last, and until it is gone the bucket still says it is a
		// directory. A file made at its name since is all there is.
		return Entry{}, false, true
	}
	return Entry{}, false, false
}

// Resolve says what full name (a path without a trailing '/') is: a file,
// a directory (a placeholder object or just a common prefix), or nothing.
// When both a file and a directory have the name, the directory wins.
//
// What is known answers: within the TTL as is; past it (or a name never
// seen, in a directory whose listing is known) at once too, refreshed in
// the background (refresh.go). Only a name with nothing known of it or
// of its directory waits for the bucket (and any name, past the TTL, in
// strict mode).
func (m *Cache) Resolve(ctx context.Context, name string, warn WarnFunc) (Entry, error) {
	if lc, ok, dirGone := m.resolveLocal(name); ok {
		return lc, nil
	} else if dirGone {
		return m.fileBehind(ctx, name)
	}
	m.ensure(parentPrefix(name))
	now := m.now()
	m.mu.Lock()
	c, exp, fromListing, known := m.knownLocked(name)
	m.mu.Unlock()
	if known && (now.Before(exp) || m.revalidate() && !unverified(exp)) {
		if !now.Before(exp) {
			c.Stale = true
			if fromListing {
				m.refreshListing(parentPrefix(name), warn)
			} else {
				m.refreshEntry(name, warn)
			}
		}
		return c, nil
	}
	ctx, cancel := askContext(ctx)
	defer cancel()
	r, err := m.resolveRemote(ctx, name, warn)
	if err != nil && known && unverified(exp) {
		return c, nil // the bucket does not answer: what is known stands
	}
	return r, err
}

// unverified says whether a record trusted until expires was loaded from
// names.db after a crash (disk.expiry): the last changes of the mount
// that wrote it may be missing from it, so it is asked again before it
// is used, and used only if the bucket does not answer.
func unverified(expires time.Time) bool { return expires.IsZero() }

// knownLocked returns what is known of name and until when it is
// trusted: the newer of its entry and its directory's listing (a listing
// fetched after a lookup shows a newer version, and wins), corrected by
// this cache's own changes confirmed since.
func (m *Cache) knownLocked(name string) (c Entry, expires time.Time, fromListing, ok bool) {
	var at time.Time
	e, eok := m.known.entry(name)
	l, lok := m.known.listing(parentPrefix(name))
	var child Entry
	if lok {
		child = l.Child(name[len(parentPrefix(name)):])
	}
	// At the same time, the higher generation is the newer news.
	listingNewer := lok && (l.fetched.After(e.asked) ||
		l.fetched.Equal(e.asked) && child.Attrs.Generation > e.Attrs.Generation)
	switch {
	case eok && !listingNewer:
		c, at, expires = e.Entry, e.asked, e.expires
	case lok:
		c, at, expires, fromListing = child, l.fetched, l.expires, true
	default:
		return Entry{}, time.Time{}, false, false
	}
	if rc, ok := m.recentSinceLocked(name, at); ok {
		c = rc.over(c) // confirmed since the bucket was asked
	}
	if m.trustedLocked(at) {
		expires = farFuture // announcements are live (announce.go)
	}
	return c, expires, fromListing, true
}

// resolveRemote asks the bucket what name is, and remembers it, unless a
// change of this mount in name's directory was confirmed (or the name
// dropped, Stale, DirMoved) while the bucket was asked: the answer may
// predate it (a background refresh asked before an rmdir or a mkdir
// reached the bucket brought the old answer back for the TTL). Files are
// corrected with the recent confirmations; directories have no such
// record, so such an answer is given to its caller but not kept.
func (m *Cache) resolveRemote(ctx context.Context, name string, warn WarnFunc) (Entry, error) {
	parent := parentPrefix(name)
	m.mu.Lock()
	now, before := m.now(), m.stampLocked(parent)
	m.mu.Unlock()
	// Ask for the object and for anything under name/ at the same time.
	type statResult struct {
		a   transfer.ObjectAttrs
		err error
	}
	sc := make(chan statResult, 1)
	go func() {
		a, err := m.b.Stat(ctx, name)
		sc <- statResult{a, err}
	}()
	page, lerr := m.b.List(ctx, transfer.ListQuery{Prefix: name + "/", Delimiter: "/", PageSize: 1, Placeholders: true})
	st := <-sc
	if lerr != nil {
		return Entry{}, lerr
	}
	if st.err != nil && !errors.Is(st.err, transfer.ErrNotExist) {
		return Entry{}, st.err
	}
	isDir := len(page.Objects) > 0 || len(page.Prefixes) > 0
	var c Entry
	var ph placeholder // the directory's placeholder, if isDir
	switch {
	case isDir:
		if st.err == nil {
			warn(name, "object hidden: a directory has the same name", "shown_as", name+"/")
		}
		c = Entry{Kind: Dir}
		// "name/" comes before any other name under it: the first one
		// says whether the directory has a placeholder.
		ph.exists = len(page.Objects) > 0 && page.Objects[0].Name == name+"/"
		if ph.exists {
			ph.a = page.Objects[0]
		}
	case st.err == nil:
		c = Entry{Kind: File, Attrs: st.a}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if rc, ok := m.recentSinceLocked(name, now); ok {
		c = rc.over(c) // confirmed while the bucket was asked
	}
	if !m.heldLocked(parent, before) {
		return c, nil // may predate a change made meanwhile: not kept
	}
	if isDir {
		m.notePlaceholderLocked(name+"/", ph.a, ph.exists, now)
	}
	m.putLocked(name, c, now)
	return c, nil
}

// putLocked remembers that the bucket said, when asked at now, that name
// is c; if that is news, the name is noted as changed.
func (m *Cache) putLocked(name string, c Entry, now time.Time) {
	if m.ttl <= 0 {
		return
	}
	if old, _, _, ok := m.knownLocked(name); ok && differs(old, c) {
		m.noteChangedLocked(name)
	}
	m.known.putEntry(name, cachedEntry{Entry: c, asked: now, expires: now.Add(m.ttl)})
}

// fileBehind says whether the bucket has a file at name, a directory
// removed here whose objects are still being deleted (resolveLocal).
func (m *Cache) fileBehind(ctx context.Context, name string) (Entry, error) {
	ctx, cancel := askContext(ctx)
	defer cancel()
	a, err := m.b.Stat(ctx, name)
	switch {
	case errors.Is(err, transfer.ErrNotExist):
		return Entry{Kind: None}, nil
	case err != nil:
		return Entry{}, err
	}
	return Entry{Kind: File, Attrs: a}, nil
}

// DirAttrs returns the placeholder object of directory prefix (not "",
// ending in '/'), where its mode, owner and time are kept, if it has one:
// the local version if it has changes not yet in the bucket, else what
// the bucket said (past the TTL refreshed in the background, as for
// Resolve), else what it says now.
func (m *Cache) DirAttrs(ctx context.Context, prefix string) (transfer.ObjectAttrs, bool, error) {
	if prefix == "" {
		return transfer.ObjectAttrs{}, false, nil // the root has no object
	}
	if a, ok := m.local.Local(prefix); ok {
		return a, true, nil
	}
	m.ensure(placeholderGroup(prefix))
	now := m.now()
	m.mu.Lock()
	p, ok := m.known.placeholder(prefix)
	if ok && m.trustedLocked(p.asked) {
		p.expires = farFuture // announcements are live (announce.go)
	}
	m.mu.Unlock()
	if ok && (now.Before(p.expires) || m.revalidate() && !unverified(p.expires)) {
		if !now.Before(p.expires) {
			m.refreshPlaceholder(prefix)
		}
		return p.a, p.exists, nil
	}
	ctx, cancel := askContext(ctx)
	defer cancel()
	a, exists, err := m.dirAttrsRemote(ctx, prefix)
	if err != nil && ok && unverified(p.expires) {
		return p.a, p.exists, nil // the bucket does not answer: what is known stands
	}
	return a, exists, err
}

// dirAttrsRemote asks the bucket for the placeholder of prefix, and
// remembers it.
//
// As in resolveRemote, an answer during which a change in the directory
// above was confirmed or dropped (DirMoved drops the placeholders of a
// moved directory) is not kept: it may predate the change.
func (m *Cache) dirAttrsRemote(ctx context.Context, prefix string) (transfer.ObjectAttrs, bool, error) {
	g := placeholderGroup(prefix)
	m.mu.Lock()
	now, before := m.now(), m.stampLocked(g)
	m.mu.Unlock()
	a, err := m.b.Stat(ctx, prefix)
	exists := err == nil
	if err != nil {
		if !errors.Is(err, transfer.ErrNotExist) {
			return transfer.ObjectAttrs{}, false, err
		}
		a = transfer.ObjectAttrs{}
	}
	if a, ok := m.local.Local(prefix); ok {
		return a, true, nil // made here meanwhile
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.heldLocked(g, before) {
		if old, ok := m.known.placeholder(prefix); ok && old.asked.Before(now) &&
			(old.exists != exists || old.a.Generation != a.Generation || old.a.Metageneration != a.Metageneration) {
			m.noteChangedLocked(strings.TrimSuffix(prefix, "/"))
		}
		m.notePlaceholderLocked(prefix, a, exists, now)
	}
	if p, ok := m.known.placeholder(prefix); ok && p.asked.After(now) {
		a, exists = p.a, p.exists // confirmed while the bucket was asked
	}
	return a, exists, nil
}
