package warm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// errNoSpace stands for the cache's no-space error.
var errNoSpace = errors.New("no space")

// fakeBucket lists its objects on one page.
type fakeBucket []transfer.ObjectAttrs

func (b fakeBucket) List(ctx context.Context, q transfer.ListQuery) (transfer.ListPage, error) {
	var p transfer.ListPage
	for _, a := range b {
		if strings.HasPrefix(a.Name, q.Prefix) {
			p.Objects = append(p.Objects, a)
		}
	}
	return p, nil
}

// fakeCache is a cache that holds the names in complete, fails Fill
// for the names in fail, and keeps kept bytes it cannot evict.
type fakeCache struct {
	complete map[string]bool
	fail     map[string]error
	kept     int64
	// fill, if set, runs in Fill in place of calling opened.
	fill func(ctx context.Context, a transfer.ObjectAttrs, opened func()) error

	mu      sync.Mutex
	keptAsk []map[string]bool // what Kept was given
	asked   []string          // the names Complete was asked about
	filled  []string          // the names Fill was called for, in order
	pinned  []string          // the names pinned
	notPins []string          // the names Complete or Fill were given without pin
}

func (c *fakeCache) Kept(names map[string]bool) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keptAsk = append(c.keptAsk, names)
	return c.kept
}

func (c *fakeCache) Complete(a transfer.ObjectAttrs, pin bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, a.Name)
	if !c.complete[a.Name] {
		return false
	}
	c.pinLocked(a.Name, pin)
	return true
}

func (c *fakeCache) Fill(ctx context.Context, a transfer.ObjectAttrs, pin bool, opened func()) (bool, error) {
	c.mu.Lock()
	c.filled = append(c.filled, a.Name)
	c.mu.Unlock()
	var err error
	if c.fill != nil {
		err = c.fill(ctx, a, opened)
	} else {
		opened()
	}
	if err == nil {
		err = c.fail[a.Name]
	}
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	c.pinLocked(a.Name, pin)
	c.mu.Unlock()
	return false, nil
}

func (c *fakeCache) pinLocked(name string, pin bool) {
	if pin {
		c.pinned = append(c.pinned, name)
	} else {
		c.notPins = append(c.notPins, name)
	}
}

func obj(name string, size int64) transfer.ObjectAttrs {
	return transfer.ObjectAttrs{Name: name, Size: size, Generation: 1}
}

func warmerOf(c *fakeCache, b fakeBucket, max int64) Warmer {
	return Warmer{Cache: c, Bucket: b, MaxSize: max, NoSpace: errNoSpace}
}

// TestWarmListsEachOnceBiggestFirst: the objects under the prefixes (as
// directories: "dx" is not under "d"), each once however many prefixes
// name it, placeholders left out, are fetched biggest first, by name
// where sizes tie.
func TestWarmListsEachOnceBiggestFirst(t *testing.T) {
	b := fakeBucket{obj("d/", 0), obj("d/a", 10), obj("d/b", 30), obj("d/sub/c", 10), obj("dx", 50), obj("e/x", 30), obj("f/y", 5)}
	c := &fakeCache{}
	r, err := warmerOf(c, b, 1000).Warm(context.Background(), []string{"d", "d/sub", "e"}, Options{Parallelism: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"d/b", "e/x", "d/a", "d/sub/c"}
	if !slices.Equal(c.filled, want) {
		t.Errorf("filled %v, want %v", c.filled, want)
	}
	if r.TotalFiles != 4 || r.Files != 4 || r.TotalBytes != 80 || r.Bytes != 80 || r.Failed != 0 || r.AlreadyFiles != 0 {
		t.Errorf("report %+v, want 4 files of 80 bytes fetched", r)
	}

	c = &fakeCache{}
	if _, err := warmerOf(c, b, 1000).Warm(context.Background(), []string{""}, Options{Parallelism: 1}, nil); err != nil {
		t.Fatal(err)
	}
	want = []string{"dx", "d/b", "e/x", "d/a", "d/sub/c", "f/y"}
	if !slices.Equal(c.filled, want) {
		t.Errorf("the whole bucket: filled %v, want %v", c.filled, want)
	}
}

// TestWarmRefusesWhatDoesNotFit: objects that do not fit beside the
// bytes the cache keeps outside them are refused before anything is
// asked of the cache, with the shortfall; exactly the cap fits.
func TestWarmRefusesWhatDoesNotFit(t *testing.T) {
	b := fakeBucket{obj("p/a", 30), obj("p/b", 40), obj("q/a", 20)}
	c := &fakeCache{kept: 40}
	_, err := warmerOf(c, b, 100).Warm(context.Background(), []string{"p"}, Options{}, nil)
	var nr *NoRoomError
	if !errors.As(err, &nr) || !errors.Is(err, errNoSpace) {
		t.Fatalf("Warm = %v, want a NoRoomError matching the cache's no-space error", err)
	}
	if *nr != (NoRoomError{Need: 110, Kept: 40, Max: 100, Short: 10, space: errNoSpace}) {
		t.Errorf("NoRoomError = %+v, want 110 needed, 40 kept, 100 max, 10 short", *nr)
	}
	if len(c.keptAsk) != 1 || len(c.keptAsk[0]) != 2 || !c.keptAsk[0]["p/a"] || !c.keptAsk[0]["p/b"] {
		t.Errorf("Kept was asked %v, want once, outside p/a and p/b", c.keptAsk)
	}
	if len(c.asked) != 0 || len(c.filled) != 0 {
		t.Errorf("a refused warm asked about %v and filled %v", c.asked, c.filled)
	}

	c = &fakeCache{kept: 30}
	if r, err := warmerOf(c, b, 100).Warm(context.Background(), []string{"p"}, Options{}, nil); err != nil || r.Files != 2 {
		t.Errorf("Warm of 70 bytes beside 30 kept in 100 = %+v, %v; want both fetched", r, err)
	}
}

// TestWarmCountsWhatItFound: a copy found complete is counted as such
// and not filled, a failure is counted and named (by name), the others
// are fetched; pin reaches the cache; progress starts with the totals
// and follows each object.
func TestWarmCountsWhatItFound(t *testing.T) {
	b := fakeBucket{obj("f/a", 10), obj("f/b", 20), obj("f/c", 30), obj("f/d", 40)}
	c := &fakeCache{
		complete: map[string]bool{"f/b": true},
		fail:     map[string]error{"f/d": errors.New("gone"), "f/a": errors.New("damaged")},
	}
	var seen []Progress
	r, err := warmerOf(c, b, 1000).Warm(context.Background(), []string{"f"}, Options{Parallelism: 3, Pin: true}, func(p Progress) {
		seen = append(seen, p)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Progress{Files: 4, TotalFiles: 4, Bytes: 100, TotalBytes: 100, AlreadyFiles: 1, AlreadyBytes: 20, Failed: 2, FailedBytes: 50}
	if r.WarmProgress != want {
		t.Errorf("report %+v, want %+v", r.WarmProgress, want)
	}
	if len(r.Errors) != 2 || r.Errors[0] != (Error{Object: "f/a", Err: "damaged"}) || r.Errors[1] != (Error{Object: "f/d", Err: "gone"}) {
		t.Errorf("errors %v, want f/a then f/d", r.Errors)
	}
	slices.Sort(c.filled)
	if !slices.Equal(c.filled, []string{"f/a", "f/c", "f/d"}) {
		t.Errorf("filled %v, want all but f/b (complete)", c.filled)
	}
	slices.Sort(c.pinned)
	if !slices.Equal(c.pinned, []string{"f/b", "f/c"}) || len(c.notPins) != 0 {
		t.Errorf("pinned %v (not %v), want f/b and f/c: the copies complete", c.pinned, c.notPins)
	}
	if len(seen) != 5 || seen[0] != (Progress{TotalFiles: 4, TotalBytes: 100}) || seen[4] != want {
		t.Fatalf("progress %+v, want the totals, then one per object ending with the report", seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i].Files != i {
			t.Errorf("progress %d: %d files done, want %d", i, seen[i].Files, i)
		}
	}
}

// TestWarmBoundsErrors: a warm whose objects all fail (the bucket away)
// names at most maxErrors of them and counts them all: the report goes
// to the client in one line of the control socket, which a million
// failures would overflow.
func TestWarmBoundsErrors(t *testing.T) {
	defer func(n int) { maxErrors = n }(maxErrors)
	maxErrors = 3
	var b fakeBucket
	fail := map[string]error{}
	for i := range 8 {
		name := fmt.Sprintf("f/%d", i)
		b = append(b, obj(name, 1))
		fail[name] = errors.New("not found")
	}
	r, err := warmerOf(&fakeCache{fail: fail}, b, 1000).Warm(context.Background(), []string{"f"}, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Failed != 8 || len(r.Errors) != 3 {
		t.Fatalf("Warm = %d failed, %d named; want 8 failed, 3 named", r.Failed, len(r.Errors))
	}
}

// TestWarmBoundsOpens: at most warmOpens objects are being opened at
// once, while all of Parallelism are fetched at once.
func TestWarmBoundsOpens(t *testing.T) {
	const n = 4 * warmOpens
	var b fakeBucket
	for i := range n {
		b = append(b, obj(fmt.Sprintf("o/%02d", i), 1))
	}
	var mu sync.Mutex
	opening, most, fetching := 0, 0, 0
	all := make(chan struct{})
	c := &fakeCache{fill: func(ctx context.Context, a transfer.ObjectAttrs, opened func()) error {
		mu.Lock()
		opening++
		most = max(most, opening)
		mu.Unlock()
		time.Sleep(time.Millisecond) // an open that takes a while, as one in a busy directory does
		mu.Lock()
		opening--
		fetching++
		if fetching == n {
			close(all)
		}
		mu.Unlock()
		opened()
		select {
		case <-all: // every object is fetched at once
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	r, err := warmerOf(c, b, 1000).Warm(context.Background(), []string{"o"}, Options{Parallelism: n}, nil)
	if err != nil || r.Files != n || r.Failed != 0 {
		t.Fatalf("Warm = %+v, %v; want %d files fetched", r, err, n)
	}
	if most > warmOpens {
		t.Errorf("%d opens at once, want at most %d", most, warmOpens)
	}
}

// TestWarmStopsWithItsContext: once its context ends, a warm starts no
// more objects, waits for those started, and returns the context's error
// with what it counted.
func TestWarmStopsWithItsContext(t *testing.T) {
	b := fakeBucket{obj("s/a", 3), obj("s/b", 2), obj("s/c", 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &fakeCache{fill: func(ctx context.Context, a transfer.ObjectAttrs, opened func()) error {
		opened()
		cancel()
		<-ctx.Done()
		return ctx.Err()
	}}
	r, err := warmerOf(c, b, 1000).Warm(ctx, []string{"s"}, Options{Parallelism: 1}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Warm = %v, want context.Canceled", err)
	}
	if !slices.Equal(c.filled, []string{"s/a"}) || r.TotalFiles != 3 || r.Files != 1 || r.Failed != 1 {
		t.Errorf("filled %v, report %+v; want s/a alone started, and failed", c.filled, r)
	}
}

// TestOnePins: One fills a version pinned, or finds it complete.
func TestOnePins(t *testing.T) {
	c := &fakeCache{complete: map[string]bool{"a": true}}
	w := warmerOf(c, nil, 0)
	if already, err := w.One(context.Background(), obj("a", 1), true); !already || err != nil {
		t.Errorf("One(a) = %v, %v; want found complete", already, err)
	}
	if already, err := w.One(context.Background(), obj("b", 1), true); already || err != nil {
		t.Errorf("One(b) = %v, %v; want filled", already, err)
	}
	if !slices.Equal(c.pinned, []string{"a", "b"}) || !slices.Equal(c.filled, []string{"b"}) {
		t.Errorf("pinned %v, filled %v; want a and b pinned, b filled", c.pinned, c.filled)
	}
}

// TestReportJSON: a report's JSON, the control socket's, has the
// progress's keys at its top, beside the errors.
func TestReportJSON(t *testing.T) {
	r := Report{WarmProgress: Progress{Files: 2, TotalFiles: 3, Failed: 1}, Errors: []Error{{Object: "a", Err: "gone"}}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"files":2,"total_files":3,"bytes":0,"total_bytes":0,"already_files":0,"already_bytes":0,"failed":1,"failed_bytes":0,"errors":[{"object":"a","err":"gone"}]}`
	if string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
}
