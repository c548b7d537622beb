package names

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "a.txt": true, "ünïcode ✓": true, strings.Repeat("x", 255): true,
		"": false, ".": false, "..": false, strings.Repeat("x", 256): false,
		"a/b": false, "nul\x00": false, "...": true,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestParentPrefix(t *testing.T) {
	for name, want := range map[string]string{
		"a": "", "a/b": "a/", "a/b/c": "a/b/", "a//b": "a//",
	} {
		if got := parentPrefix(name); got != want {
			t.Errorf("parentPrefix(%q) = %q, want %q", name, got, want)
		}
	}
}

// listOnlyBucket answers List from objects; nothing else is called.
type listOnlyBucket struct {
	transfer.Bucket
	objects []transfer.ObjectAttrs
}

func (b *listOnlyBucket) List(ctx context.Context, q transfer.ListQuery) (transfer.ListPage, error) {
	return transfer.ListPage{Objects: b.objects}, nil
}

// racingLocal has one local change, d/f, whose upload is confirmed (and
// which leaves the overlay) at the moment the overlay asks about it.
type racingLocal struct {
	dirty     bool
	onConfirm func()
}

func (r *racingLocal) Local(name string) (transfer.ObjectAttrs, bool) {
	if f := r.onConfirm; f != nil {
		r.onConfirm = nil
		f()
	}
	if r.dirty {
		return transfer.ObjectAttrs{Name: name, Size: 1}, true
	}
	return transfer.ObjectAttrs{}, false
}

func (r *racingLocal) LocalSubdirs(prefix string) (present, removed []string) {
	p, rm := r.LocalNames(prefix)
	return subdirsOf(prefix, p, rm)
}

func (r *racingLocal) LocalNames(prefix string) (present, removed []string) {
	if r.dirty {
		return []string{"d/f"}, nil
	}
	return nil, nil
}

// A listing taken before an upload was confirmed, laid over with local
// changes after the file left them, must not lose the file (found by the
// model-based tester: a renamed file vanished from a listing).
func TestListingDoesNotLoseAFileConfirmedMeanwhile(t *testing.T) {
	b := &listOnlyBucket{}
	local := &racingLocal{dirty: true}
	m := New(b, local, time.Minute)
	uploaded := transfer.ObjectAttrs{Name: "d/f", Size: 1, Generation: 7}
	local.onConfirm = func() {
		b.objects = []transfer.ObjectAttrs{uploaded}
		m.Confirmed("d/f", uploaded, false)
		local.dirty = false
	}
	l, err := m.List(context.Background(), "d/", func(string, string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	if c := l.Child("f"); c.Kind != File {
		t.Errorf("d/ lists %v: the file confirmed while the listing was made is missing", l.Names())
	}
}

// noLocal has no local changes.
type noLocal struct{}

func (noLocal) Local(string) (transfer.ObjectAttrs, bool)       { return transfer.ObjectAttrs{}, false }
func (noLocal) LocalNames(string) (present, removed []string)   { return nil, nil }
func (noLocal) LocalSubdirs(string) (present, removed []string) { return nil, nil }

// A listing fetched before a file was confirmed under a new (implicit)
// directory, and cached, must show that directory, and a lookup of the
// directory must find it, for as long as the listing is used (found by the
// crash test of directory renames: many copies ending while the tree
// was walked left a directory missing for the TTL).
func TestCachedListingsShowWhatWasConfirmedSince(t *testing.T) {
	b := &listOnlyBucket{} // empty when listed
	m := New(b, noLocal{}, time.Minute)
	warn := func(string, string, ...any) {}
	ctx := context.Background()
	for _, p := range []string{"", "t/", "t/d/"} {
		if _, err := m.List(ctx, p, warn); err != nil {
			t.Fatal(err)
		}
	}
	a := transfer.ObjectAttrs{Name: "t/d/sub/f", Size: 3, Generation: 9}
	m.Confirmed(a.Name, a, false) // the listings above stay cached
	for p, seg := range map[string]string{"": "t", "t/": "d", "t/d/": "sub"} {
		l, err := m.List(ctx, p, warn)
		if err != nil {
			t.Fatal(err)
		}
		if l.Child(seg).Kind != Dir {
			t.Errorf("%q lists %v, want directory %s", p, l.names, seg)
		}
	}
	if c, err := m.Resolve(ctx, "t/d/sub", warn); err != nil || c.Kind != Dir {
		t.Errorf("resolve(t/d/sub) = %v, %v; want a directory", c.Kind, err)
	}
}

// hookBucket answers List with a fixed page after running onList once.
type hookBucket struct {
	transfer.Bucket
	page   transfer.ListPage
	onList func()
}

func (b *hookBucket) List(ctx context.Context, q transfer.ListQuery) (transfer.ListPage, error) {
	if f := b.onList; f != nil {
		b.onList = nil
		f()
	}
	return b.page, nil
}

// A listing of a directory asked for before a change of its placeholder
// (its mode) was confirmed answers with the old placeholder: the
// directory must keep showing the confirmed one.
func TestPlaceholderConfirmedDuringAListingWins(t *testing.T) {
	old := transfer.ObjectAttrs{Name: "d/", Generation: 1, Metadata: map[string]string{modeKey: "700"}}
	changed := transfer.ObjectAttrs{Name: "d/", Generation: 2, Metadata: map[string]string{modeKey: "750"}}
	b := &hookBucket{page: transfer.ListPage{Objects: []transfer.ObjectAttrs{old, {Name: "d/f", Generation: 1}}}}
	m := New(b, noLocal{}, time.Minute)
	b.onList = func() { m.Confirmed("d/", changed, false) }
	ctx := context.Background()
	if _, err := m.List(ctx, "d/", func(string, string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	a, ok, err := m.DirAttrs(ctx, "d/")
	if err != nil || !ok || a.Generation != 2 || a.Metadata[modeKey] != "750" {
		t.Errorf("dirAttrs(d/) = %+v, %v, %v; want generation 2, mode 750", a, ok, err)
	}
	// A listing asked for afterwards is news again.
	b.page.Objects[0] = transfer.ObjectAttrs{Name: "d/", Generation: 3}
	m.ForgetUnder("d/")
	if _, err := m.List(ctx, "d/", func(string, string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	if a, ok, _ := m.DirAttrs(ctx, "d/"); !ok || a.Generation != 3 {
		t.Errorf("after a new listing dirAttrs(d/) = %+v, %v; want generation 3", a, ok)
	}
}

// modeKey is the metadata key fs keeps a mode in; to this package, a
// key like any other.
const modeKey = "bucketfs-mode"

// A subdirectory met twice in a listing (a listing cut into name ranges
// shows one that a range begins inside of on two pages) is one child,
// with no warning of a hidden object.
func TestListingKeepsADirectoryMetTwice(t *testing.T) {
	b := prefixBucket{"d/": {Prefixes: []string{"d/s/", "d/t/", "d/s/"}, Objects: []transfer.ObjectAttrs{{Name: "d/f", Generation: 1}}}}
	m := New(b, noLocal{}, time.Minute)
	var warned []string
	l, err := m.List(context.Background(), "d/", func(name, msg string, _ ...any) { warned = append(warned, name+": "+msg) })
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Names(); !slices.Equal(got, []string{"f", "s", "t"}) {
		t.Errorf("listing %v, want [f s t]", got)
	}
	if l.Dirs() != 2 {
		t.Errorf("%d subdirectories, want 2", l.Dirs())
	}
	if len(warned) > 0 {
		t.Errorf("warned: %v", warned)
	}
}

// prefixBucket answers a listing of a prefix with its page (none if it
// has none).
type prefixBucket map[string]transfer.ListPage

func (b prefixBucket) Stat(ctx context.Context, name string) (transfer.ObjectAttrs, error) {
	return transfer.ObjectAttrs{}, transfer.ErrNotExist
}

func (b prefixBucket) List(ctx context.Context, q transfer.ListQuery) (transfer.ListPage, error) {
	return b[q.Prefix], nil
}
