package names

import (
	"context"
	"errors"
	"slices"
	"strings"
)

// A listing read while it comes (issue 35). A cold directory of 100,000
// names is a hundred pages, listed in name ranges at once
// (transfer.ListInOrder), about a second behind a WAN; an application
// that reads the directory gets its first names with the first page, not
// when the last range has come. The names of a bucket that pages as GCS
// does come in name order, so a child is shown as soon as the names met
// so far decide it. The local changes are laid over at the end: a name
// they touch waits for the whole listing (withLocal's rules, in one
// place), and so does every name of a bucket whose pages are not in
// order.
//
// What a reader of the stream sees is a directory as it was at some
// moment between its open and the end of the listing, name by name:
// every name that was there throughout shows once; one made or removed
// meanwhile may or may not show, as POSIX allows for readdir (the
// listing of a directory that was open while it changed).

// errClosed is a listing asked for after Close.
var errClosed = errors.New("the name cache is closed")

// Stream lists the level under prefix as List does, and shows each child
// of the answer to show, once, as soon as it is decided: from the listing
// in memory, in name order, if one is known; else while it is fetched.
// show is called by one goroutine at a time, not always the caller's.
// known is called once the listing is in memory, so that a lookup of one
// of its names asks nobody (at once if it was known; not at all if it
// could not be remembered). Stream returns the listing, local changes
// shown over it, once every child was shown. An error after some
// children were shown ends the stream; what was shown stands.
func (m *Cache) Stream(ctx context.Context, prefix string, warn WarnFunc, show func(seg string, e Entry), known func()) (*Listing, error) {
	// The listing is the Cache's work as well as the caller's: Close
	// ends it and waits for it.
	m.mu.Lock()
	closed := m.bg.closed
	if !closed {
		m.bg.wg.Add(1)
	}
	m.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	defer m.bg.wg.Done()
	m.ensure(prefix)
	m.mu.Lock()
	_, isKnown := m.known.listing(prefix)
	before := m.stampLocked(prefix)
	m.mu.Unlock()
	if isKnown {
		l, err := m.List(ctx, prefix, warn)
		if err != nil {
			return nil, err
		}
		known()
		for _, seg := range l.Names() {
			show(seg, l.Child(seg))
		}
		return l, nil
	}
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	defer context.AfterFunc(m.bg.ctx, cancel)()
	now := m.now()
	touched := m.localSegs(prefix) // read before the listing: see withLocal's rules
	var shown []string             // 16 bytes a child: the names are the listing's
	l, phs, err := m.fetchLevel(ctx, prefix, warn, func(seg string, e Entry) {
		if _, ok := touched[seg]; !ok {
			shown = append(shown, seg)
			show(seg, e)
		}
	})
	if err != nil {
		return nil, err
	}
	if m.storeFetched(prefix, l, phs, before, now) {
		if m.ttl > 0 {
			known()
		}
	} else {
		l.fetched = now // not remembered (a change was confirmed meanwhile); withLocal reads the change
	}
	// The rest: what the local changes touch, and all of a listing whose
	// pages were not in order.
	out := m.withLocalSettled(prefix, l)
	slices.Sort(shown)
	for _, seg := range out.Names() {
		if _, ok := slices.BinarySearch(shown, seg); !ok {
			show(seg, out.Child(seg))
		}
	}
	m.listAhead(prefix, l, warn) // ahead.go
	return out, nil
}

// withLocalSettled is withLocal, made again (a few times at most) if a
// change under prefix was confirmed while it was made (see List).
func (m *Cache) withLocalSettled(prefix string, l *Listing) *Listing {
	for try := 0; ; try++ {
		before := m.changeCount(prefix)
		out := m.withLocal(prefix, l)
		if try == 3 || m.changeCount(prefix) == before {
			return out
		}
	}
}

// localSegs returns the names in directory prefix that local changes
// touch: a file written or deleted, a directory made or removed, or
// holding such a change.
func (m *Cache) localSegs(prefix string) map[string]struct{} {
	present, removed := m.local.LocalNames(prefix)
	segs := map[string]struct{}{}
	for _, names := range [][]string{present, removed} {
		for _, name := range names {
			rest := name[len(prefix):]
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				rest = rest[:i]
			}
			segs[rest] = struct{}{}
		}
	}
	return segs
}

// recSpan is the records set.recs[from:to] of a childSet being made:
// what one page of a listing added.
type recSpan struct{ from, to int }

// levelCursor shows the children of a level whose names come in name
// order as soon as the names met decide them: a directory when its
// prefix is met; a file once a name after its name and "/" is met (or
// the listing ends), since a directory of its name would hide it
// (sortHidingFiles), and "x/" comes after names such as "x.txt" in byte
// order. A nil cursor shows nothing.
type levelCursor struct {
	prefix string
	show   func(seg string, e Entry)
	page   []metName // the names of the page being decided
	held   []metName // files a directory of their name may yet hide
	last   string    // the greatest name decided
	off    bool      // names came out of order: nothing more is shown
}

// metName is a name of the listing: an object's, or a prefix.
type metName struct {
	key, seg string
	e        Entry
}

// decide shows what the records of sp, the next page in name order,
// decide.
func (c *levelCursor) decide(set *childSet, sp recSpan) {
	if c == nil || c.off {
		return
	}
	for i := sp.from; i < sp.to; i++ {
		r := &set.recs[i]
		key := c.prefix + r.seg
		if r.kind == Dir {
			key += "/"
		}
		c.page = append(c.page, metName{key, r.seg, set.entry(r)})
	}
	slices.SortFunc(c.page, func(a, b metName) int { return strings.Compare(a.key, b.key) })
	for _, n := range c.page {
		if n.key == c.last && n.e.Kind == Dir {
			continue // a prefix that ended the page before begins this one
		}
		if n.key <= c.last {
			c.off = true // not as ListInOrder promises: leave it all to the end
			break
		}
		c.last = n.key
		kept := c.held[:0]
		for _, h := range c.held {
			switch {
			case n.e.Kind == Dir && h.seg == n.seg:
				// hidden by the directory
			case n.key > h.key+"/":
				c.show(h.seg, h.e)
			default:
				kept = append(kept, h)
			}
		}
		clear(c.held[len(kept):])
		c.held = kept
		if n.e.Kind == Dir {
			c.show(n.seg, n.e)
		} else {
			c.held = append(c.held, n)
		}
	}
	clear(c.page)
	c.page = c.page[:0]
}

// finish shows the files still held: the listing has ended.
func (c *levelCursor) finish() {
	if c == nil || c.off {
		return
	}
	for _, h := range c.held {
		c.show(h.seg, h.e)
	}
	c.held = nil
}
