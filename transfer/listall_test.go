package transfer

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil/testemu"
)

// sortedBucket lists names as GCS does (name order, pages of at most
// PageSize entries, prefixes rolled up from the objects in the offsets'
// range), or as the servers ListAll must not be fooled by: one that
// ignores startOffset, and one that shows every prefix on every page.
type sortedBucket struct {
	Bucket
	names          []string // sorted
	honourOffsets  int64    // with ignoreOffsets: the offsets of this many requests are honoured first
	ignoreOffsets  bool
	prefixesAlways bool
	requests       atomic.Int64
}

func (b *sortedBucket) List(ctx context.Context, q ListQuery) (ListPage, error) {
	b.requests.Add(1)
	if err := ctx.Err(); err != nil {
		return ListPage{}, err
	}
	from, end := max(q.Prefix, q.StartOffset), q.EndOffset
	if b.ignoreOffsets && b.requests.Load() > b.honourOffsets {
		from, end = q.Prefix, ""
	}
	if q.PageToken != "" {
		from = q.PageToken
	}
	size := q.PageSize
	var p ListPage
	i := sort.SearchStrings(b.names, from)
	count := 0
	for i < len(b.names) {
		n := b.names[i]
		if !strings.HasPrefix(n, q.Prefix) || end != "" && n >= end {
			break
		}
		if count == size {
			p.NextPageToken = n
			break
		}
		if j := strings.Index(n[len(q.Prefix):], q.Delimiter); q.Delimiter != "" && j >= 0 {
			pre := n[:len(q.Prefix)+j+1]
			if !b.prefixesAlways {
				count++ // GCS counts a prefix; fake-gcs-server objects only
			}
			if !b.prefixesAlways {
				p.Prefixes = append(p.Prefixes, pre)
			}
			if q.Placeholders && n == pre {
				p.Objects = append(p.Objects, ObjectAttrs{Name: n})
			}
			after, _ := successor(pre)
			i = sort.SearchStrings(b.names, after)
			continue
		}
		count++
		p.Objects = append(p.Objects, ObjectAttrs{Name: n})
		i++
	}
	if b.prefixesAlways && q.Delimiter != "" {
		// Every prefix of the listing, on every page, kept to the
		// offsets by its own name (as fake-gcs-server's own listing).
		seen := map[string]bool{}
		for _, n := range b.names {
			if rest, ok := strings.CutPrefix(n, q.Prefix); ok {
				j := strings.Index(rest, q.Delimiter)
				if j < 0 || seen[rest[:j]] {
					continue
				}
				if pre := q.Prefix + rest[:j+1]; pre >= q.StartOffset && (q.EndOffset == "" || pre < q.EndOffset) {
					seen[rest[:j]] = true
					p.Prefixes = append(p.Prefixes, pre)
				}
			}
		}
	}
	return p, nil
}

// listed returns what ListAll hands on, the prefixes met twice dropped,
// sorted, and fails if an object comes twice, or if a page said to be
// in order has a name not after every name handed on before it, or a
// prefix handed on before.
func listed(t *testing.T, b Bucket, q ListQuery, parallel int) []string {
	t.Helper()
	names, _ := listedInOrder(t, b, q, parallel)
	return names
}

// listedInOrder is listed, and reports whether every page was said to
// be in name order. It lists by ListInOrder, which hands each page to
// take as it comes (checked as ListAll's pages) and in order to inOrder
// (checked for order: a name not after every name before it fails, but
// for a prefix that begins a page and ended the one before).
func listedInOrder(t *testing.T, b Bucket, q ListQuery, parallel int) (_ []string, ordered bool) {
	t.Helper()
	var mu sync.Mutex
	busy := false
	enter := func() func() {
		mu.Lock()
		if busy {
			t.Error("take or inOrder called by two goroutines at once")
		}
		busy = true
		mu.Unlock()
		return func() { mu.Lock(); busy = false; mu.Unlock() }
	}
	seen := map[string]bool{}
	take := func(p ListPage) (ListPage, error) {
		defer enter()()
		for _, a := range p.Objects {
			if seen[a.Name] {
				t.Errorf("object %q handed on twice", a.Name)
			}
			seen[a.Name] = true
		}
		for _, pre := range p.Prefixes {
			seen[pre+" (prefix)"] = true
		}
		return p, nil
	}
	ordered = true
	var last string // the greatest name handed on in order
	inOrder := func(p ListPage, isOrdered bool) error {
		defer enter()()
		ordered = ordered && isOrdered
		if !isOrdered {
			return nil
		}
		pageLast := last
		for _, a := range p.Objects {
			if a.Name <= last {
				t.Errorf("object %q handed on after %q, in a page said to be in order", a.Name, last)
			}
			pageLast = max(pageLast, a.Name)
		}
		for _, pre := range p.Prefixes {
			if pre < last || pre == last && !strings.HasSuffix(last, q.Delimiter) {
				t.Errorf("prefix %q handed on after %q, in a page said to be in order", pre, last)
			}
			pageLast = max(pageLast, pre)
		}
		last = pageLast
		return nil
	}
	if err := ListInOrder(context.Background(), b, q, parallel, take, inOrder); err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, ordered
}

// sequential is the listing page by page.
func sequential(t *testing.T, b Bucket, q ListQuery) []string {
	t.Helper()
	return listed(t, b, q, 1)
}

func TestListAllEveryNameOnce(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	alphabets := []string{"0123456789", "abcdefghijklmnopqrstuvwxyz", "ab/", "a\x00\xff/", "-._~0123456789ABCDEFabcdef/"}
	for round := 0; round < 200; round++ {
		alpha := alphabets[rng.Intn(len(alphabets))]
		set := map[string]bool{}
		n := rng.Intn(3000)
		for range n {
			k := 1 + rng.Intn(12)
			var sb strings.Builder
			sb.WriteString("dir/")
			if rng.Intn(3) == 0 {
				sb.WriteString("x") // a dense clump
			}
			for range k {
				sb.WriteByte(alpha[rng.Intn(len(alpha))])
			}
			set[sb.String()] = true
		}
		set["dir/"] = true
		set["other"] = true
		names := make([]string, 0, len(set))
		for s := range set {
			names = append(names, s)
		}
		sort.Strings(names)
		q := ListQuery{Prefix: "dir/"}
		if rng.Intn(2) == 0 {
			q.Delimiter, q.Placeholders = "/", rng.Intn(2) == 0
		}
		q.PageSize = 1 + rng.Intn(50)
		b := &sortedBucket{names: names}
		want := sequential(t, b, q)
		for _, variant := range []string{"gcs", "ignores offsets", "every prefix on every page"} {
			vb := &sortedBucket{names: names}
			switch variant {
			case "ignores offsets":
				vb.ignoreOffsets = true
			case "every prefix on every page":
				vb.prefixesAlways = true
			}
			vwant := want
			if vb.prefixesAlways {
				vwant = sequential(t, vb, q)
			}
			got, ordered := listedInOrder(t, vb, q, 1+rng.Intn(16))
			if variant != "every prefix on every page" && !ordered {
				t.Fatalf("round %d (%s, %d names, %+v): pages not said to be in name order", round, variant, len(names), q)
			}
			if !slices.Equal(got, vwant) {
				t.Fatalf("round %d (%s, %d names, %+v): ListAll lists %d names, page by page %d; first missing or extra: %q",
					round, variant, len(names), q, len(got), len(vwant), firstDiff(got, vwant))
			}
		}
	}
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("%q vs %q", a[i], b[i])
		}
	}
	return "(one is longer)"
}

// A directory of 100,000 names in pages of 1,000 is listed in a few
// rounds of requests at once, with few requests beyond the 100 pages.
func TestListAllFewRequests(t *testing.T) {
	var names []string
	for i := range 100000 {
		names = append(names, fmt.Sprintf("big/file%06d", i))
	}
	b := &sortedBucket{names: names}
	// Each request waits for the others that can run with it: the number
	// of rounds is what a WAN's latency multiplies.
	var inFlight, most atomic.Int64
	rb := &roundBucket{sortedBucket: b, inFlight: &inFlight, most: &most}
	got := listed(t, rb, ListQuery{Prefix: "big/"}, 16)
	if len(got) != len(names) {
		t.Fatalf("listed %d names, want %d", len(got), len(names))
	}
	req := b.requests.Load()
	t.Logf("%d requests, at most %d at once", req, most.Load())
	if req > 200 {
		t.Errorf("%d requests for 100 pages; want at most 200", req)
	}
	if most.Load() < 8 {
		t.Errorf("at most %d requests at once; want the listing spread over at least 8", most.Load())
	}
}

// roundBucket counts how many of its Lists run at once.
type roundBucket struct {
	*sortedBucket
	inFlight, most *atomic.Int64
}

func (b *roundBucket) List(ctx context.Context, q ListQuery) (ListPage, error) {
	n := b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	for {
		m := b.most.Load()
		if n <= m || b.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(time.Millisecond) // a request takes time, so that others overlap it
	return b.sortedBucket.List(ctx, q)
}

func TestNameScaleKeepsOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	p := ListPage{Objects: []ObjectAttrs{{Name: "d/a0"}, {Name: "d/z9"}, {Name: "d/m/"}}}
	s := newNameScale(p, 2).from("d/")
	for range 10000 {
		a, b := randName(rng), randName(rng)
		if a > b {
			a, b = b, a
		}
		if s.value(a) > s.value(b) {
			t.Fatalf("%q < %q but reads as %d > %d", a, b, s.value(a), s.value(b))
		}
		va, vb := rng.Uint64()%s.max, rng.Uint64()%s.max
		if va > vb {
			va, vb = vb, va
		}
		if s.name(va) > s.name(vb) {
			t.Fatalf("%d < %d but names %q > %q", va, vb, s.name(va), s.name(vb))
		}
	}
}

func randName(rng *rand.Rand) string {
	const chars = "/09az\x00\xff"
	b := []byte("d/")
	if rng.Intn(8) == 0 {
		b = []byte("c")
	}
	for range rng.Intn(6) {
		b = append(b, chars[rng.Intn(len(chars))])
	}
	return string(b)
}

// Through GCS's JSON API (the emulator's listing, which takes startOffset
// and endOffset as GCS does), a listing cut into ranges lists what one
// page after another lists: objects, prefixes a range begins inside of,
// and placeholders.
func TestListAllThroughGCS(t *testing.T) {
	emu := testemu.Start(t, emulator.Options{Buckets: []string{bucketName}, Seeded: true})
	var seeds []emulator.Seed
	for i := range 3000 {
		seeds = append(seeds, emulator.Seed{Name: fmt.Sprintf("d/f%05d", i), Data: []byte("x")})
		if i%41 == 0 {
			for j := range 20 {
				seeds = append(seeds, emulator.Seed{Name: fmt.Sprintf("d/f%05d/x%02d", i, j), Data: []byte("y")})
			}
			seeds = append(seeds, emulator.Seed{Name: fmt.Sprintf("d/f%05d/", i)})
		}
	}
	if _, err := emu.PutMany(bucketName, slices.Values(seeds)); err != nil {
		t.Fatal(err)
	}
	g := newTestGCS(t, emu)
	for _, q := range []ListQuery{
		{Prefix: "d/", Delimiter: "/", Placeholders: true, PageSize: 100},
		{Prefix: "d/", PageSize: 200},
	} {
		want := sequential(t, g, q)
		got := listed(t, g, q, 16)
		if !slices.Equal(got, want) {
			t.Errorf("%+v: ListAll lists %d names, page by page %d; first missing or extra: %s", q, len(got), len(want), firstDiff(got, want))
		}
		if len(want) < 3000 {
			t.Errorf("%+v: only %d names listed", q, len(want))
		}
	}
}

// A bucket that honours the offsets of some requests and not of later
// ones: once a range's page was handed on, listing again page by page
// would hand pages on twice, so the listing fails instead; it never
// hands on an object twice or leaves one out and succeeds.
func TestListAllOffsetsHonouredThenIgnored(t *testing.T) {
	var names []string
	for i := range 5000 {
		names = append(names, fmt.Sprintf("d/f%05d", i))
	}
	b := &sortedBucket{names: names, ignoreOffsets: true, honourOffsets: 3}
	seen := map[string]int{}
	err := ListAll(context.Background(), b, ListQuery{Prefix: "d/", PageSize: 100}, 1, countObjects(seen))
	if err != nil || len(seen) != len(names) {
		t.Fatalf("page by page: %v, %d names", err, len(seen))
	}
	clear(seen)
	b.requests.Store(0)
	err = ListAll(context.Background(), b, ListQuery{Prefix: "d/", PageSize: 100}, 16, countObjects(seen))
	for n, k := range seen {
		if k > 1 {
			t.Fatalf("%s handed on %d times", n, k)
		}
	}
	if err == nil && len(seen) != len(names) {
		t.Fatalf("ListAll succeeded with %d names of %d", len(seen), len(names))
	}
	if err != nil && !errors.Is(err, errOffsetsIgnored) {
		t.Fatalf("ListAll = %v, want nil or errOffsetsIgnored", err)
	}
}

// countObjects counts the objects of each page in seen.
func countObjects(seen map[string]int) func(ListPage) error {
	return func(p ListPage) error {
		for _, a := range p.Objects {
			seen[a.Name]++
		}
		return nil
	}
}
