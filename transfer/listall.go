package transfer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// A long listing by name ranges listed at once (issue 35, item 2).
//
// A bucket lists in name order, one page of at most 1,000 entries per
// request, each page asked for with the token of the one before: a
// directory of 100,000 names is 100 round trips in a row. GCS also takes
// a name range (startOffset, endOffset). ListAll asks for the first page
// as before. If there is more, it guesses from that page where the rest of
// the names lie, lists ranges of them at once, and splits a range again
// whenever its first page shows that it holds more.
//
// A guess only ever costs requests. The ranges always cover all of the
// rest, one after the other, so a wrong guess makes an empty range or one
// that splits again, never a lost or doubled object. With a delimiter a
// range may begin inside a prefix, which is then on two pages; callers
// drop the second.
//
// Where the names lie is guessed by reading names as numbers: the
// characters a page shows, in byte order, are the digits (nameScale). From
// the span of the first page, ranges of growing width (1, 2, 4, ... pages'
// worth) follow it, so that a listing of any length is covered after one
// round trip; a range that turns out to hold more than a page is split
// evenly between its last name and its end.

const (
	listPageSize = 1000 // entries a page holds at most (GCS's most)
	listAhead    = 12   // ranges of doubling width guessed past a page that ends an open range
	listSplit    = 8    // ranges a full bounded range is split into
)

// errOffsetsIgnored is a range's page with names before the range: the
// bucket does not honour StartOffset, and ListAll lists page by page.
var errOffsetsIgnored = errors.New("the bucket ignores startOffset")

// ListAll hands every page of the listing q to each. Once the first page
// shows that more is to come, up to parallel pages are asked for at once
// (1: one page after another, by page token). each is called by one
// goroutine at a time, with pages in no particular order; with a
// delimiter, a prefix may be on more than one page. An error from each
// or from the bucket ends the listing and is returned. q's PageToken and
// offsets must be empty; a PageSize of 0 is GCS's most, 1,000.
func ListAll(ctx context.Context, b Lister, q ListQuery, parallel int, each func(ListPage) error) error {
	take := func(p ListPage) (struct{}, error) { return struct{}{}, each(p) }
	return ListInOrder(ctx, b, q, parallel, take, func(struct{}, bool) error { return nil })
}

// ListInOrder is ListAll that also hands the pages on in name order.
// take is ListAll's each: it is called for each page as it comes, and
// what it makes of the page (a T: the caller keeps the page in a form of
// its own, compact, and T says where) is then handed to inOrder, in the
// order of the pages' names. Both are called by one goroutine at a time.
//
// With a bucket that pages as GCS does (each entry on one page, a prefix
// counting as one entry), ordered is true for every page: what inOrder
// has been handed is all of the listing up to the last name of its last
// page, but for a prefix, which may begin a page as well as end the one
// before it. A bucket that shows every prefix on every page
// (fake-gcs-server's own listing) is listed page after page, and ordered
// is false: a prefix may come before names less than it.
func ListInOrder[T any](ctx context.Context, b Lister, q ListQuery, parallel int, take func(ListPage) (T, error), inOrder func(t T, ordered bool) error) error {
	if q.PageSize <= 0 {
		q.PageSize = listPageSize
	}
	page, err := b.List(ctx, q)
	if err != nil {
		return err
	}
	ordered := page.NextPageToken == "" || countsAsGCS(q, page)
	if err := takeInOrder(page, ordered, take, inOrder); err != nil {
		return err
	}
	if page.NextPageToken == "" {
		return nil
	}
	if first, last, resume, ok := pageBounds(page); parallel > 1 && ok && ordered {
		l := &rangeLister[T]{b: b, q: q, sem: make(chan struct{}, parallel), take: take,
			order: pageOrder[T]{each: inOrder, next: resume}}
		err := l.run(ctx, guessRanges(q.Prefix, page, first, last, resume))
		if !errors.Is(err, errOffsetsIgnored) || l.taken {
			// A bucket that ignores the offsets fails every range's first
			// page; one that honoured them for some pages and not others
			// cannot be listed again without handing pages on twice.
			return err
		}
	}
	for q.PageToken = page.NextPageToken; q.PageToken != ""; q.PageToken = page.NextPageToken {
		if page, err = b.List(ctx, q); err != nil {
			return err
		}
		if err := takeInOrder(page, ordered, take, inOrder); err != nil {
			return err
		}
	}
	return nil
}

// takeInOrder hands a page of a listing page after page to take, and at
// once what it made to inOrder.
func takeInOrder[T any](p ListPage, ordered bool, take func(ListPage) (T, error), inOrder func(T, bool) error) error {
	t, err := take(p)
	if err != nil {
		return err
	}
	return inOrder(t, ordered)
}

// Lister is the part of a Bucket that ListAll uses.
type Lister interface {
	List(ctx context.Context, q ListQuery) (ListPage, error)
}

// nameRange is the names from from (included) to to (excluded); to ""
// is the end of the listing.
type nameRange struct{ from, to string }

// rangeLister lists ranges of one listing, each by as many goroutines
// as there are ranges, at most cap(sem) of them asking at once.
type rangeLister[T any] struct {
	b     Lister
	q     ListQuery
	sem   chan struct{}
	take  func(ListPage) (T, error)
	mu    sync.Mutex // held while take and order's each run, and for err, taken and order
	taken bool       // a range's page was handed to take
	order pageOrder[T]
	err   error
	wg    sync.WaitGroup
}

// run lists rs and the ranges they are split into, and returns the first
// error.
func (l *rangeLister[T]) run(ctx context.Context, rs []nameRange) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var start func(r nameRange)
	start = func(r nameRange) {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			select {
			case l.sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			more, err := l.list(ctx, r)
			<-l.sem
			if err != nil {
				l.mu.Lock()
				if l.err == nil {
					l.err = err
				}
				l.mu.Unlock()
				cancel()
				return
			}
			for _, m := range more {
				start(m)
			}
		}()
	}
	for _, r := range rs {
		start(r)
	}
	l.wg.Wait()
	if l.err == nil && ctx.Err() != nil {
		l.err = ctx.Err()
	}
	if l.err == nil && !l.order.complete() {
		// Cannot be: the ranges cover the rest of the listing, one after
		// the other. Failing beats handing on a listing with a hole.
		l.err = fmt.Errorf("listing %q: the name ranges do not join at %q", l.q.Prefix, l.order.next)
	}
	return l.err
}

// list lists the first page of r, hands it on, and returns the ranges
// the rest of r is split into.
func (l *rangeLister[T]) list(ctx context.Context, r nameRange) ([]nameRange, error) {
	q := l.q
	q.StartOffset, q.EndOffset = r.from, r.to
	for {
		page, err := l.b.List(ctx, q)
		if err != nil {
			return nil, err
		}
		page, past, err := clip(page, r)
		if err != nil {
			return nil, err
		}
		first, last, resume, ok := pageBounds(page)
		var more []nameRange
		switch {
		case page.NextPageToken == "" || past || ok && r.to != "" && resume >= r.to:
			resume = r.to // r is done
		case !ok:
			q.PageToken = page.NextPageToken // an empty page with more after it
			continue
		case r.to == "":
			more = guessRanges(l.q.Prefix, page, first, last, resume)
		default:
			more = splitRange(page, first, last, resume, r.to)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.taken = true
		t, err := l.take(page)
		if err != nil {
			return nil, err
		}
		return more, l.order.hand(r.from, resume, t)
	}
}

// pageOrder hands what was made of the pages of ranges, which come in
// any order, on in name order: a page waits until every range before its
// own was handed on. A range's page holds the names from where the range
// begins to where the ranges made of its rest begin (or its end), so the
// pages join one after the other.
type pageOrder[T any] struct {
	each    func(T, bool) error
	next    string                  // every name before it was handed on; "" with done
	done    bool                    // the listing's end was handed on
	waiting map[string]rangePage[T] // pages not yet handed on, by where their range begins
}

// rangePage is what was made of a page of the names from where its range
// begins to upTo ("": to the end of the listing).
type rangePage[T any] struct {
	t    T
	upTo string
}

// hand takes t, made of the page of the names from from to upTo, and
// hands on every page that can now go.
func (o *pageOrder[T]) hand(from, upTo string, t T) error {
	if from != o.next || o.done {
		if o.waiting == nil {
			o.waiting = map[string]rangePage[T]{}
		}
		o.waiting[from] = rangePage[T]{t, upTo}
		return nil
	}
	for {
		if err := o.each(t, true); err != nil {
			return err
		}
		o.next, o.done = upTo, upTo == ""
		w, ok := o.waiting[o.next]
		if o.done || !ok {
			return nil
		}
		delete(o.waiting, o.next)
		t, upTo = w.t, w.upTo
	}
}

// complete reports whether the whole listing was handed on.
func (o *pageOrder[T]) complete() bool { return o.done && len(o.waiting) == 0 }

// clip drops from p what is at or after r.to (past: there was some, so
// r is done) and fails with errOffsetsIgnored if p has names before
// r.from: a prefix may begin before it only if r.from is inside it.
func clip(p ListPage, r nameRange) (_ ListPage, past bool, _ error) {
	objs := p.Objects[:0:0]
	for _, a := range p.Objects {
		switch {
		case a.Name < r.from:
			return p, false, errOffsetsIgnored
		case r.to != "" && a.Name >= r.to:
			past = true
		default:
			objs = append(objs, a)
		}
	}
	prefixes := p.Prefixes[:0:0]
	for _, pre := range p.Prefixes {
		switch {
		case pre < r.from && !strings.HasPrefix(r.from, pre):
			return p, false, errOffsetsIgnored
		case r.to != "" && pre >= r.to:
			past = true
		default:
			prefixes = append(prefixes, pre)
		}
	}
	p.Objects, p.Prefixes = objs, prefixes
	return p, past, nil
}

// pageBounds returns the least and the greatest name on p, and where the
// listing goes on after it: past its last object, or past every name
// under its last prefix. ok is false if p is empty, or nothing can follow
// it.
func pageBounds(p ListPage) (first, last, resume string, ok bool) {
	var lastObj, lastPre string
	for _, a := range p.Objects {
		lastObj = max(lastObj, a.Name)
		if first == "" || a.Name < first {
			first = a.Name
		}
	}
	for _, pre := range p.Prefixes {
		lastPre = max(lastPre, pre)
		if first == "" || pre < first {
			first = pre
		}
	}
	last = max(lastObj, lastPre)
	if last == "" {
		return "", "", "", false
	}
	if lastObj != "" {
		resume = lastObj + "\x00" // the least name after it
	}
	if lastPre != "" {
		after, ok := successor(lastPre)
		if !ok {
			return "", "", "", false
		}
		resume = max(resume, after)
	}
	return first, last, resume, true
}

// countsAsGCS reports whether p, asked for with q, is at most a page of
// q.PageSize entries, a prefix and its placeholder object counting once,
// as GCS counts them. A server that shows prefixes beyond that (every
// prefix on every page, counting objects only, as fake-gcs-server's own
// listing does) has pages that do not end at their last entry, and its
// listing is not cut into ranges.
func countsAsGCS(q ListQuery, p ListPage) bool {
	n := len(p.Prefixes)
	for _, a := range p.Objects {
		if !strings.HasSuffix(a.Name, q.Delimiter) || q.Delimiter == "" || !slices.Contains(p.Prefixes, a.Name) {
			n++
		}
	}
	return n <= q.PageSize
}

// successor returns the least string greater than every string that
// begins with s; ok is false if there is none (s is all 0xff bytes).
func successor(s string) (string, bool) {
	b := []byte(s)
	for len(b) > 0 && b[len(b)-1] == 0xff {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return "", false
	}
	b[len(b)-1]++
	return string(b), true
}

// guessRanges splits the open rest of a listing, from resume on, after a
// page whose names went from first to last: a range as wide as the page,
// then ranges twice as wide as the one before, and the rest.
//
// The names are read from where the page's names begin to differ, less
// the bytes before that which are among the digits: after a page from
// file000000 to file000999, the names that follow (file001000) differ
// from it in a byte the page did not change.
func guessRanges(prefix string, p ListPage, first, last, resume string) []nameRange {
	varies := len(commonPrefix(first, last))
	s := newNameScale(p, varies)
	stem := first[:varies]
	for len(stem) > len(prefix) && s.isDigit(stem[len(stem)-1]) {
		stem = stem[:len(stem)-1]
	}
	s = s.from(stem)
	vf, vl := s.value(first), s.value(last)
	d := max(vl-vf, 1)
	var points []string
	for i := 0; i < listAhead && d <= (s.max-vl)>>i; i++ {
		points = append(points, s.name(vl+d<<i))
	}
	return ranges(resume, points, "")
}

// splitRange splits the rest of a bounded range, from resume to to, after
// a page whose names went from first to last: into as many ranges as it
// would hold pages as dense as that one, at most listSplit.
func splitRange(p ListPage, first, last, resume, to string) []nameRange {
	stem := commonPrefix(resume, to)
	s := newNameScale(p, len(commonPrefix(first, last)), to[len(stem):]).from(stem)
	vf, vl, vr, vt := s.value(first), s.value(last), s.value(resume), s.value(to)
	var points []string
	if vt > vr {
		w := max(vl-vf, 1)
		n := min((vt-vr)/w+1, listSplit)
		step := (vt - vr) / n
		for i := uint64(1); i < n && step > 0; i++ {
			points = append(points, s.name(vr+i*step))
		}
	}
	return ranges(resume, points, to)
}

// ranges returns the ranges from from to to cut at points, leaving out
// the points that are not after the cut before them (or not before to).
func ranges(from string, points []string, to string) []nameRange {
	var out []nameRange
	for _, pt := range points {
		if pt <= from || to != "" && pt >= to {
			continue
		}
		out = append(out, nameRange{from, pt})
		from = pt
	}
	return append(out, nameRange{from, to})
}

func commonPrefix(a, b string) string {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return a[:n]
}

// nameScale reads names that begin with stem as numbers: each byte after
// the stem is a digit, its rank among the bytes seen (0 for the end of the
// name), over as many places as a uint64 holds. Order is kept (a greater
// name is never a smaller number), so cuts made at numbers are cuts in
// name order; names that share more bytes than the places hold read alike.
type nameScale struct {
	stem   string
	digits []byte // the bytes seen, in order: digit i+1 is digits[i]
	places int
	max    uint64
}

// newNameScale makes the digits of a scale from the bytes of p's names
// after their first varies bytes, and the bytes of extra. Its stem is
// set with from.
func newNameScale(p ListPage, varies int, extra ...string) nameScale {
	var seen [256]bool
	note := func(s string) {
		for i := 0; i < len(s); i++ {
			seen[s[i]] = true
		}
	}
	for _, a := range p.Objects {
		note(a.Name[min(varies, len(a.Name)):])
	}
	for _, pre := range p.Prefixes {
		note(pre[min(varies, len(pre)):])
	}
	for _, e := range extra {
		note(e)
	}
	var s nameScale
	for c := range seen {
		if seen[c] {
			s.digits = append(s.digits, byte(c))
		}
	}
	base := uint64(len(s.digits) + 1)
	m := uint64(1)
	for base > 1 && m <= (1<<63)/base {
		m *= base
		s.places++
	}
	s.max = m - 1
	return s
}

// from returns s reading the names after stem.
func (s nameScale) from(stem string) nameScale {
	s.stem = stem
	return s
}

// isDigit reports whether c is one of s's digits.
func (s nameScale) isDigit(c byte) bool {
	_, ok := slices.BinarySearch(s.digits, c)
	return ok
}

// value is name as a number.
func (s nameScale) value(name string) uint64 {
	rest, ok := strings.CutPrefix(name, s.stem)
	if !ok {
		if name < s.stem {
			return 0
		}
		return s.max
	}
	base := uint64(len(s.digits) + 1)
	var v uint64
	for i := 0; i < s.places; i++ {
		if i >= len(rest) {
			v *= base // the end of the name: digit 0
			continue
		}
		r := sort.Search(len(s.digits), func(j int) bool { return s.digits[j] >= rest[i] })
		if r < len(s.digits) && s.digits[r] == rest[i] {
			v = v*base + uint64(r+1)
			continue
		}
		// A byte not seen lies between the digits r and r+1: it reads
		// as digit r followed by the greatest digits, so that every
		// name below it reads no greater, and every name above it no
		// smaller.
		v = v*base + uint64(r)
		for i++; i < s.places; i++ {
			v = v*base + base - 1
		}
	}
	return v
}

// name is the name that v reads as (the least, where several do).
func (s nameScale) name(v uint64) string {
	base := uint64(len(s.digits) + 1)
	ds := make([]uint64, s.places)
	for i := s.places - 1; i >= 0; i-- {
		ds[i] = v % base
		v /= base
	}
	b := []byte(s.stem)
	for _, d := range ds {
		if d == 0 {
			break
		}
		b = append(b, s.digits[d-1])
	}
	return string(b)
}
