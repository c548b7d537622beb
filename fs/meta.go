package fs

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// maxNameLen is the longest file name the kernel accepts (NAME_MAX).
const maxNameLen = 255

type kind int

const (
	kindNone kind = iota // no such name (a negative entry)
	kindFile
	kindDir
)

// child is what a name in a directory is.
type child struct {
	kind  kind
	attrs transfer.ObjectAttrs // for files
}

type cachedChild struct {
	child
	asked   time.Time // when the bucket was asked
	expires time.Time
}

// listing is one directory level, as listed from the bucket.
type listing struct {
	children map[string]child
	names    []string  // sorted
	fetched  time.Time // when the listing was asked for
	expires  time.Time
	// hidden holds the files of the bucket that a directory of the same
	// name hides: shown if that directory is removed here while the
	// bucket still has objects under it (its old name after a rename).
	hidden map[string]child
}

// recentChange is a change of this cache to a file, confirmed in the
// bucket at a time: what the file is now.
type recentChange struct {
	child
	at time.Time
}

// warnFunc reports an object that cannot be shown, once per name.
type warnFunc func(name, msg string, args ...any)

// metaCache remembers names and attributes for a TTL: positive and
// negative lookups, and whole directory listings. A fresh listing answers
// lookups of its children too, so 'ls -l' costs one listing, not one stat
// per file. TTL 0 disables caching.
type metaCache struct {
	b     transfer.Bucket
	ttl   time.Duration
	local localView // changes not yet in the bucket; shown over what it says

	mu    sync.Mutex
	names map[string]cachedChild // guarded by mu: full name (no trailing '/')
	dirs  map[string]*listing    // guarded by mu: prefix ("" or ending in '/')
	// changes counts the confirmed changes per prefix; a listing that ran
	// while one came in may predate it, so it is fetched again.
	changes map[string]uint64 // guarded by mu
	// recent holds the files whose changes were confirmed lately, by
	// prefix and name: an answer from the bucket asked for before the
	// confirmation may predate it (a listing or a lookup running while
	// many uploads end, as after a directory rename), so such answers
	// are corrected with these. Kept for recentFor.
	recent      map[string]map[string]recentChange // guarded by mu
	recentSwept time.Time                          // guarded by mu: when old ones were last dropped
	// placeholders holds what the bucket said of directories'
	// placeholder objects ("dir/", which keep their mode, owner and
	// time), by prefix. Newer news wins: an answer asked for before a
	// confirmed change of the placeholder never replaces it.
	placeholders map[string]placeholder // guarded by mu
}

// placeholder is what the bucket holds at a directory's "dir/" name.
type placeholder struct {
	a       transfer.ObjectAttrs
	exists  bool
	asked   time.Time // when the bucket was asked (or confirmed the change)
	expires time.Time
}

// recentFor is how long confirmed changes are kept in metaCache.recent:
// longer than any answer asked for before them is used.
func (m *metaCache) recentFor() time.Duration { return 2*m.ttl + time.Minute }

// localView is the part of the cache the tree needs to show local changes.
type localView interface {
	// Local describes name's local copy if it has changes not yet uploaded.
	Local(name string) (transfer.ObjectAttrs, bool)
	// LocalNames lists the names under prefix with such changes: written
	// (present) or deleted (removed).
	LocalNames(prefix string) (present, removed []string)
}

func newMetaCache(b transfer.Bucket, local localView, ttl time.Duration) *metaCache {
	return &metaCache{b: b, local: local, ttl: ttl, names: map[string]cachedChild{}, dirs: map[string]*listing{},
		changes: map[string]uint64{}, recent: map[string]map[string]recentChange{}, placeholders: map[string]placeholder{}}
}

// forget drops what is remembered about name after a local change to it.
// Listings stay: local changes are shown over them on every use.
func (m *metaCache) forget(name string) {
	m.mu.Lock()
	delete(m.names, name)
	m.mu.Unlock()
}

// stale drops what is remembered of name, and the listing of its
// directory, which holds it too: the bucket has another version of it
// than the one they say.
func (m *metaCache) stale(name string) {
	parent := parentPrefix(name)
	m.mu.Lock()
	m.changes[parent]++ // a listing running now may predate the change
	delete(m.names, name)
	delete(m.dirs, parent)
	m.mu.Unlock()
}

// forgetUnder drops what is remembered about the names and listings
// under prefix (a directory renamed).
func (m *metaCache) forgetUnder(prefix string) {
	m.mu.Lock()
	for k := range m.names {
		if strings.HasPrefix(k, prefix) {
			delete(m.names, k)
		}
	}
	for k := range m.dirs {
		if strings.HasPrefix(k, prefix) {
			delete(m.dirs, k)
		}
	}
	for k := range m.placeholders {
		if strings.HasPrefix(k, prefix) {
			delete(m.placeholders, k)
		}
	}
	m.mu.Unlock()
}

// dirMoved records that directory prefix from is now prefix to: the
// listings that hold either name are dropped, with what is remembered of
// the names. A bucket that renames folders did it in one step, with no
// local change to show over a listing that predates it.
func (m *metaCache) dirMoved(from, to string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range []string{from, to} {
		full := strings.TrimSuffix(p, "/")
		parent := parentPrefix(full)
		m.changes[parent]++ // a listing running now may predate the move
		delete(m.dirs, parent)
		delete(m.names, full)
		for k := range m.placeholders {
			if strings.HasPrefix(k, p) {
				delete(m.placeholders, k)
			}
		}
	}
}

// confirmed records that a local change of name reached the bucket: the
// object a is there now, or (deleted) it is gone. The change then leaves
// the local overlay, so the cached listing of its directory must say what
// the bucket now says, or the name would vanish (or come back) until the
// TTL ends. Listings are replaced, never changed in place: readers hold
// them without the lock.
func (m *metaCache) confirmed(name string, a transfer.ObjectAttrs, deleted bool) {
	full := strings.TrimSuffix(name, "/")
	if full == "" {
		return
	}
	isDir := full != name // a directory's placeholder
	parent := parentPrefix(full)
	seg := full[len(parent):]
	m.mu.Lock()
	defer m.mu.Unlock()
	m.changes[parent]++ // even uncached: a listing running now may predate the change
	delete(m.names, full)
	if isDir {
		m.notePlaceholderLocked(name, a, !deleted, time.Now())
	}
	if !isDir {
		m.noteRecentLocked(parent, seg, child{kind: kindFile, attrs: a}, deleted)
	}
	if !deleted {
		m.ancestorsExistLocked(parent)
	}
	l, ok := m.dirs[parent]
	if !ok {
		return
	}
	cur := l.children[seg]
	var next child
	switch {
	case isDir && deleted:
		// The directory may live on through other objects under it: let
		// the bucket say.
		delete(m.dirs, parent)
		delete(m.dirs, name)
		return
	case isDir:
		next = child{kind: kindDir}
	case cur.kind == kindDir:
		// A directory of that name wins; the file stays hidden behind it.
		nl := &listing{children: l.children, names: l.names, fetched: l.fetched, expires: l.expires, hidden: maps.Clone(l.hidden)}
		if nl.hidden == nil {
			nl.hidden = map[string]child{}
		}
		if deleted {
			delete(nl.hidden, seg)
		} else {
			nl.hidden[seg] = child{kind: kindFile, attrs: a}
		}
		m.dirs[parent] = nl
		return
	case deleted && cur.kind != kindFile:
		return
	case !deleted:
		next = child{kind: kindFile, attrs: a}
	}
	nl := &listing{children: make(map[string]child, len(l.children)+1), fetched: l.fetched, expires: l.expires, hidden: l.hidden}
	for k, v := range l.children {
		nl.children[k] = v
	}
	if next.kind == kindNone {
		delete(nl.children, seg)
	} else {
		nl.children[seg] = next
	}
	for k := range nl.children {
		nl.names = append(nl.names, k)
	}
	sort.Strings(nl.names)
	m.dirs[parent] = nl
}

// ancestorsExistLocked records that directory prefix dir and those above
// it exist in the bucket now (an object under them was confirmed): a
// listing of a level above asked for before may lack them, if they exist
// only through that object.
func (m *metaCache) ancestorsExistLocked(dir string) {
	for dir != "" {
		up := parentPrefix(strings.TrimSuffix(dir, "/"))
		seg := dir[len(up) : len(dir)-1]
		// Not counted in m.changes: listings of every level above would
		// be fetched again for each upload below; recent corrects them.
		m.noteRecentLocked(up, seg, child{kind: kindDir}, false)
		if l, ok := m.dirs[up]; ok && l.children[seg].kind != kindDir {
			nl := &listing{children: make(map[string]child, len(l.children)+1), fetched: l.fetched, expires: l.expires, hidden: l.hidden}
			for k, v := range l.children {
				nl.children[k] = v
			}
			nl.children[seg] = child{kind: kindDir}
			for k := range nl.children {
				nl.names = append(nl.names, k)
			}
			sort.Strings(nl.names)
			m.dirs[up] = nl
		}
		dir = up
	}
}

// noteRecentLocked records a confirmed change of name parent+seg (what it
// is now: c, or nothing if deleted), and forgets changes old enough that
// no answer predating them is used.
func (m *metaCache) noteRecentLocked(parent, seg string, c child, deleted bool) {
	now := time.Now()
	if deleted {
		c = child{kind: kindNone}
	}
	set := m.recent[parent]
	if set == nil {
		set = map[string]recentChange{}
		m.recent[parent] = set
	}
	set[seg] = recentChange{child: c, at: now}
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

// recentSince returns the confirmed change of file name made at or
// after t, if any.
func (m *metaCache) recentSinceLocked(name string, t time.Time) (child, bool) {
	parent := parentPrefix(name)
	rc, ok := m.recent[parent][name[len(parent):]]
	if !ok || rc.at.Before(t) {
		return child{}, false
	}
	return rc.child, true
}

// madeEmpty records that the directory prefix was just made here and is
// empty in the bucket, so that looking up new names in it needs no request
// for the TTL.
func (m *metaCache) madeEmpty(prefix string) {
	if m.ttl <= 0 {
		return
	}
	m.mu.Lock()
	now := time.Now()
	m.dirs[prefix] = &listing{children: map[string]child{}, fetched: now, expires: now.Add(m.ttl)}
	m.mu.Unlock()
}

// resolveLocal says what name is from local changes alone, if they
// decide (ok). dirGone says that they decide only that name is no
// directory (one removed here, whose objects may still be in the bucket).
func (m *metaCache) resolveLocal(name string) (c child, ok, dirGone bool) {
	if a, ok := m.local.Local(name); ok {
		return child{kind: kindFile, attrs: a}, true, false
	}
	if present, _ := m.local.LocalNames(name + "/"); len(present) > 0 {
		return child{kind: kindDir}, true, false
	}
	_, removed := m.local.LocalNames(name)
	if slices.Contains(removed, name) {
		return child{kind: kindNone}, true, false // a file deleted here
	}
	if slices.Contains(removed, name+"/") {
		// A directory removed here (or renamed away): its placeholder
		// goes last, and until it is gone the bucket still says it is a
		// directory. A file made at its name since is all there is.
		return child{}, false, true
	}
	return child{}, false, false
}

// withLocal returns l with the local changes under prefix shown over it.
func (m *metaCache) withLocal(prefix string, l *listing) *listing {
	names, removed := m.local.LocalNames(prefix)
	m.mu.Lock()
	var newer map[string]child // confirmed since the listing was asked for
	for seg, rc := range m.recent[prefix] {
		if !rc.at.Before(l.fetched) {
			if newer == nil {
				newer = map[string]child{}
			}
			newer[seg] = rc.child
		}
	}
	m.mu.Unlock()
	if len(names) == 0 && len(removed) == 0 && len(newer) == 0 {
		return l
	}
	out := &listing{children: make(map[string]child, len(l.children)+len(names)), fetched: l.fetched, expires: l.expires}
	for k, v := range l.children {
		out.children[k] = v
	}
	hidden := l.hidden // files behind a directory of the same name
	for seg, c := range newer {
		switch {
		case out.children[seg].kind == kindDir:
			if c.kind != kindDir {
				hidden = maps.Clone(hidden)
				if hidden == nil {
					hidden = map[string]child{}
				}
				hidden[seg] = c // kindNone: deleted since
			}
		case c.kind == kindNone:
			delete(out.children, seg)
		default:
			out.children[seg] = c
		}
	}
	for _, name := range removed {
		rest := name[len(prefix):]
		switch i := strings.IndexByte(rest, '/'); {
		case i < 0 && out.children[rest].kind == kindFile:
			delete(out.children, rest) // a deleted file
		case i == len(rest)-1 && out.children[rest[:i]].kind == kindDir:
			// A removed (empty) directory: a file of the same name in
			// the bucket shows now (made after the directory was
			// renamed away, while its objects are still being deleted).
			delete(out.children, rest[:i])
			if h := hidden[rest[:i]]; h.kind == kindFile && !slices.Contains(removed, prefix+rest[:i]) {
				out.children[rest[:i]] = h
			}
		}
	}
	for _, name := range names {
		rest := name[len(prefix):]
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			if validName(rest[:i]) {
				out.children[rest[:i]] = child{kind: kindDir}
			}
			continue
		}
		if a, ok := m.local.Local(name); ok && validName(rest) && out.children[rest].kind != kindDir {
			out.children[rest] = child{kind: kindFile, attrs: a}
		}
	}
	for n := range out.children {
		out.names = append(out.names, n)
	}
	sort.Strings(out.names)
	return out
}

// uninterrupted is the context of a FUSE request that changes or looks up
// names: the kernel's interrupts do not cancel it (see askContext). Only
// reads and opens, which may wait for a download, stop when the caller is
// interrupted.
func uninterrupted(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// askTimeout bounds the questions a lookup or a listing asks the bucket.
const askTimeout = time.Minute

// askContext is the context of the bucket requests of a lookup or a
// listing: not cancelled when the kernel interrupts the FUSE request, and
// bounded by askTimeout. The kernel interrupts a request whenever the
// calling thread gets a signal, and Go programs get one often (SIGURG,
// for goroutine preemption): answering EINTR to mkdir or stat then fails
// programs that do not retry it (found by the POSIX suite: a mkdir of a
// deep path failed with EINTR about once in thirty runs). These answers
// are short; a bucket that does not answer fails them with ETIMEDOUT.
func askContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), askTimeout)
}

// sweepLimit bounds how many entries pile up before expired ones are dropped.
const sweepLimit = 1 << 16

// parentPrefix returns the listing prefix of the directory holding name.
func parentPrefix(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i+1]
	}
	return ""
}

// resolve says what full name (a path without a trailing '/') is: a file,
// a directory (a placeholder object or just a common prefix), or nothing.
// When both a file and a directory have the name, the directory wins.
func (m *metaCache) resolve(ctx context.Context, name string, warn warnFunc) (child, error) {
	if lc, ok, dirGone := m.resolveLocal(name); ok {
		return lc, nil
	} else if dirGone {
		return m.fileBehind(ctx, name)
	}
	now := time.Now()
	m.mu.Lock()
	if c, ok := m.names[name]; ok && now.Before(c.expires) {
		if rc, ok := m.recentSinceLocked(name, c.asked); ok && c.kind != kindDir {
			c.child = rc // confirmed since the bucket was asked
		}
		m.mu.Unlock()
		return c.child, nil
	}
	if l, ok := m.dirs[parentPrefix(name)]; ok && now.Before(l.expires) {
		c := l.children[name[len(parentPrefix(name)):]]
		if rc, ok := m.recentSinceLocked(name, l.fetched); ok && c.kind != kindDir {
			c = rc
		}
		m.mu.Unlock()
		return c, nil
	}
	m.mu.Unlock()

	ctx, cancel := askContext(ctx)
	defer cancel()
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
		return child{}, lerr
	}
	if st.err != nil && !errors.Is(st.err, transfer.ErrNotExist) {
		return child{}, st.err
	}
	isDir := len(page.Objects) > 0 || len(page.Prefixes) > 0
	var c child
	switch {
	case isDir:
		if st.err == nil {
			warn(name, "object hidden: a directory has the same name", "shown_as", name+"/")
		}
		c = child{kind: kindDir}
		// "name/" comes before any other name under it: the first one
		// says whether the directory has a placeholder.
		ph := len(page.Objects) > 0 && page.Objects[0].Name == name+"/"
		var a transfer.ObjectAttrs
		if ph {
			a = page.Objects[0]
		}
		m.mu.Lock()
		m.notePlaceholderLocked(name+"/", a, ph, now)
		m.mu.Unlock()
	case st.err == nil:
		c = child{kind: kindFile, attrs: st.a}
	}
	m.mu.Lock()
	if rc, ok := m.recentSinceLocked(name, now); ok && c.kind != kindDir {
		c = rc // confirmed while the bucket was asked
	}
	m.mu.Unlock()
	m.put(name, c, now)
	return c, nil
}

func (m *metaCache) put(name string, c child, now time.Time) {
	if m.ttl <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.names) > sweepLimit {
		for k, v := range m.names {
			if !now.Before(v.expires) {
				delete(m.names, k)
			}
		}
	}
	m.names[name] = cachedChild{child: c, asked: now, expires: now.Add(m.ttl)}
}

// list returns the directory level under prefix, from the cache while
// fresh. Objects whose names cannot be file names are left out and
// reported through warn.
//
// A change confirmed while the local changes are laid over the listing
// may have left the overlay after the listing was taken: confirm counts
// the change (and updates the cached listing) before the change leaves
// the overlay, so a count that moved meanwhile means "do it again".
func (m *metaCache) list(ctx context.Context, prefix string, warn warnFunc) (*listing, error) {
	ctx, cancel := askContext(ctx)
	defer cancel()
	for try := 0; ; try++ {
		before := m.changeCount(prefix)
		l, err := m.listRemote(ctx, prefix, warn)
		if err != nil {
			return nil, err
		}
		out := m.withLocal(prefix, l)
		if try == 3 || m.changeCount(prefix) == before {
			return out, nil
		}
	}
}

func (m *metaCache) changeCount(prefix string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changes[prefix]
}

// listRemote is list without the local changes. A listing during which a
// change of this cache was confirmed under prefix may miss it, and the
// change has left the local overlay: such a listing is made again (a few
// times at most).
func (m *metaCache) listRemote(ctx context.Context, prefix string, warn warnFunc) (*listing, error) {
	for try := 0; ; try++ {
		m.mu.Lock()
		before := m.changes[prefix]
		m.mu.Unlock()
		l, err := m.listRemoteOnce(ctx, prefix, warn, before)
		if err != nil || l != nil || try == 3 {
			if l == nil && err == nil {
				l, err = m.listRemoteOnce(ctx, prefix, warn, ^uint64(0))
			}
			return l, err
		}
	}
}

// listRemoteOnce lists prefix (or takes the cached listing). It returns
// nil (and no error) if a change under prefix was confirmed since the
// count before was read; before == ^0 accepts the listing anyway.
func (m *metaCache) listRemoteOnce(ctx context.Context, prefix string, warn warnFunc, before uint64) (*listing, error) {
	now := time.Now()
	m.mu.Lock()
	if l, ok := m.dirs[prefix]; ok && now.Before(l.expires) {
		m.mu.Unlock()
		return l, nil
	}
	m.mu.Unlock()

	l := &listing{children: map[string]child{}}
	var files []transfer.ObjectAttrs
	q := transfer.ListQuery{Prefix: prefix, Delimiter: "/", Placeholders: true}
	phs := map[string]transfer.ObjectAttrs{} // placeholders seen: of prefix and of its subdirectories
	for {
		page, err := m.b.List(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, p := range page.Prefixes {
			if p == transfer.StagingPrefix {
				continue // parts of uploads in flight (see dirNode.reserved)
			}
			seg := strings.TrimSuffix(p[len(prefix):], "/")
			if !validName(seg) {
				warn(p, "objects hidden: their path has a segment that is not a valid file name (empty, '.', '..' or longer than 255 bytes)")
				continue
			}
			l.children[seg] = child{kind: kindDir}
		}
		files = append(files, page.Objects...)
		if page.NextPageToken == "" {
			break
		}
		q.PageToken = page.NextPageToken
	}
	for _, a := range files {
		seg := a.Name[len(prefix):]
		switch {
		case seg == "" || strings.IndexByte(seg, '/') == len(seg)-1:
			// The directory's own placeholder object, or a
			// subdirectory's (listed with Placeholders).
			phs[a.Name] = a
		case !validName(seg):
			warn(a.Name, "object hidden: its name is not a valid file name (empty segment, '.', '..' or longer than 255 bytes)")
		case l.children[seg].kind == kindDir:
			warn(a.Name, "object hidden: a directory has the same name", "shown_as", a.Name+"/")
			if l.hidden == nil {
				l.hidden = map[string]child{}
			}
			l.hidden[seg] = child{kind: kindFile, attrs: a}
		default:
			l.children[seg] = child{kind: kindFile, attrs: a}
		}
	}
	for n := range l.children {
		l.names = append(l.names, n)
	}
	sort.Strings(l.names)
	m.mu.Lock()
	defer m.mu.Unlock()
	if before != ^uint64(0) && m.changes[prefix] != before {
		return nil, nil // checked and stored under one lock: no change slips between
	}
	l.fetched = now
	// The listing says which of its directories have a placeholder.
	if prefix != "" {
		a, ok := phs[prefix]
		m.notePlaceholderLocked(prefix, a, ok, now)
	}
	for seg, c := range l.children {
		if c.kind == kindDir {
			a, ok := phs[prefix+seg+"/"]
			m.notePlaceholderLocked(prefix+seg+"/", a, ok, now)
		}
	}
	if m.ttl > 0 {
		l.expires = now.Add(m.ttl)
		if len(m.dirs) > sweepLimit/64 {
			for k, v := range m.dirs {
				if !now.Before(v.expires) {
					delete(m.dirs, k)
				}
			}
		}
		m.dirs[prefix] = l
	}
	return l, nil
}

// fileBehind says whether the bucket has a file at name, a directory
// removed here whose objects are still being deleted (resolveLocal).
func (m *metaCache) fileBehind(ctx context.Context, name string) (child, error) {
	ctx, cancel := askContext(ctx)
	defer cancel()
	a, err := m.b.Stat(ctx, name)
	switch {
	case errors.Is(err, transfer.ErrNotExist):
		return child{kind: kindNone}, nil
	case err != nil:
		return child{}, err
	}
	return child{kind: kindFile, attrs: a}, nil
}

// notePlaceholderLocked records what the bucket said, at asked, of the
// placeholder of directory prefix: a, or none (exists false). An older
// answer than the one held is dropped.
func (m *metaCache) notePlaceholderLocked(prefix string, a transfer.ObjectAttrs, exists bool, asked time.Time) {
	if m.ttl <= 0 {
		return
	}
	if cur, ok := m.placeholders[prefix]; ok && cur.asked.After(asked) {
		return
	}
	if !exists {
		a = transfer.ObjectAttrs{} // what a deletion was confirmed of is gone
	}
	if len(m.placeholders) > sweepLimit {
		for k, v := range m.placeholders {
			if !asked.Before(v.expires) {
				delete(m.placeholders, k)
			}
		}
	}
	m.placeholders[prefix] = placeholder{a: a, exists: exists, asked: asked, expires: asked.Add(m.ttl)}
}

// dirAttrs returns the placeholder object of directory prefix (not "",
// ending in '/'), where its mode, owner and time are kept, if it has one:
// the local version if it has changes not yet in the bucket, else what
// the bucket said within the TTL, else what it says now.
func (m *metaCache) dirAttrs(ctx context.Context, prefix string) (transfer.ObjectAttrs, bool, error) {
	if prefix == "" {
		return transfer.ObjectAttrs{}, false, nil // the root has no object
	}
	if a, ok := m.local.Local(prefix); ok {
		return a, true, nil
	}
	now := time.Now()
	m.mu.Lock()
	if p, ok := m.placeholders[prefix]; ok && now.Before(p.expires) {
		m.mu.Unlock()
		return p.a, p.exists, nil
	}
	m.mu.Unlock()
	ctx, cancel := askContext(ctx)
	defer cancel()
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
	m.notePlaceholderLocked(prefix, a, exists, now)
	if p, ok := m.placeholders[prefix]; ok && p.asked.After(now) {
		a, exists = p.a, p.exists // confirmed while the bucket was asked
	}
	m.mu.Unlock()
	return a, exists, nil
}

// validName reports whether seg can be a file name on Linux.
func validName(seg string) bool {
	return seg != "" && seg != "." && seg != ".." && len(seg) <= maxNameLen &&
		!strings.ContainsAny(seg, "/\x00")
}
