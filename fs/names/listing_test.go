package names

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// sameAsFull fails t unless l has exactly the children want, in every
// view (Child, each, Names, Len, the map encoded for names.db), as a
// listing built in full from want does.
func sameAsFull(t *testing.T, step int, l *Listing, want map[string]Entry) {
	t.Helper()
	full := newListing(maps.Clone(want), l.fetched, l.expires, nil)
	if l.Len() != len(want) || full.Len() != len(want) {
		t.Fatalf("step %d: %d children, want %d", step, l.Len(), len(want))
	}
	if !slices.Equal(l.Names(), full.Names()) {
		t.Fatalf("step %d: the sorted names differ from the full listing's", step)
	}
	seen := map[string]Entry{}
	l.each(func(seg string, e Entry) {
		if _, dup := seen[seg]; dup {
			t.Fatalf("step %d: %q seen twice", step, seg)
		}
		seen[seg] = e
	})
	if !maps.EqualFunc(seen, want, sameEntry) || !maps.EqualFunc(l.children(), want, sameEntry) {
		t.Fatalf("step %d: children differ from the full listing", step)
	}
	for seg, e := range want {
		if !sameEntry(l.Child(seg), e) {
			t.Fatalf("step %d: child %q = %+v, want %+v", step, seg, l.Child(seg), e)
		}
	}
	if c := l.Child("never-made"); c.Kind != None {
		t.Fatalf("step %d: an absent child is %v", step, c.Kind)
	}
}

func sameEntry(a, b Entry) bool {
	return a.Kind == b.Kind && a.Attrs.Name == b.Attrs.Name && a.Attrs.Generation == b.Attrs.Generation
}

// A long series of confirmations in one directory (new files, overwrites,
// deletions, directories made by placeholders and by files under them,
// files behind a directory of the same name) gives the listing that one
// built in full from the same children would be, across many
// compactions of the shared log; listings handed out before stay as they
// were (readers hold them without a lock).
func TestConfirmationsKeepTheListingWhole(t *testing.T) {
	b := &listOnlyBucket{}
	model := map[string]Entry{}
	for i := range 100 {
		a := transfer.ObjectAttrs{Name: fmt.Sprintf("d/base%03d", i), Size: 1, Generation: int64(i + 1)}
		b.objects = append(b.objects, a)
		model[a.Name[2:]] = Entry{Kind: File, Attrs: a}
	}
	m := New(b, noLocal{}, time.Hour)
	if _, err := m.List(context.Background(), "d/", func(string, string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	current := func() *Listing {
		m.mu.Lock()
		defer m.mu.Unlock()
		l, ok := m.known.listing("d/")
		if !ok {
			t.Fatal("the listing of d/ was dropped")
		}
		return l
	}
	type held struct {
		l    *Listing
		want map[string]Entry
		step int
	}
	var kept []held
	rnd := rand.New(rand.NewSource(1))
	gen := int64(1000)
	layers := map[*layer]bool{}
	for step := range 6000 {
		seg := fmt.Sprintf("f%03d", rnd.Intn(600))
		gen++
		a := transfer.ObjectAttrs{Name: "d/" + seg, Size: 4096, Generation: gen}
		switch r := rnd.Intn(10); {
		case r < 5: // a file written
			m.Confirmed(a.Name, a, false)
			if model[seg].Kind != Dir {
				model[seg] = Entry{Kind: File, Attrs: a}
			}
		case r < 8: // a file deleted
			m.Confirmed(a.Name, transfer.ObjectAttrs{}, true)
			if model[seg].Kind == File {
				delete(model, seg)
			}
		case r < 9: // a directory's placeholder
			m.Confirmed(a.Name+"/", transfer.ObjectAttrs{Name: a.Name + "/"}, false)
			model[seg] = Entry{Kind: Dir}
		default: // a file in a subdirectory: the directory exists
			m.Confirmed(a.Name+"/sub", transfer.ObjectAttrs{Name: a.Name + "/sub", Generation: gen}, false)
			model[seg] = Entry{Kind: Dir}
		}
		l := current()
		layers[l.lay] = true
		if step%97 == 0 || step > 5900 {
			sameAsFull(t, step, l, model)
			kept = append(kept, held{l, maps.Clone(model), step})
		}
	}
	if len(layers) < 10 {
		t.Errorf("%d layers made: the series did not cross many compactions", len(layers))
	}
	for _, h := range kept {
		sameAsFull(t, h.step, h.l, h.want)
	}
}

// Two listings made from the same one each see their own change only
// (the second cannot extend the log the first extended).
func TestListingsMadeFromOneSeeTheirOwnChange(t *testing.T) {
	base := newListing(map[string]Entry{"a": {Kind: File}}, time.Time{}, time.Time{}, nil)
	one := base.with("b", Entry{Kind: Dir})
	two := base.with("c", Entry{Kind: File})
	three := one.with("a", Entry{})
	sameAsFull(t, 1, base, map[string]Entry{"a": {Kind: File}})
	sameAsFull(t, 2, one, map[string]Entry{"a": {Kind: File}, "b": {Kind: Dir}})
	sameAsFull(t, 3, two, map[string]Entry{"a": {Kind: File}, "c": {Kind: File}})
	sameAsFull(t, 4, three, map[string]Entry{"b": {Kind: Dir}})
}

// A storm of confirmations in one directory, whose listing names.db
// writes once per batch (applyAll), leaves names.db with the last
// listing: after a reopen it answers, without a request, what the
// memory said.
func TestConfirmedListingReachesNamesDB(t *testing.T) {
	dir := t.TempDir()
	e := newEnvWith(t, diskOptions(t, dir, nil))
	e.put("d/keep", "k")
	e.list("d/")
	want := []string{"keep"}
	for i := range 500 {
		n := fmt.Sprintf("d/f%03d", i)
		e.m.Confirmed(n, transfer.ObjectAttrs{Name: n, Size: 1, Generation: int64(i + 1)}, false)
		if i%5 == 4 {
			e.m.Confirmed(n, transfer.ObjectAttrs{}, true) // deleted again
		} else {
			want = append(want, n[2:])
		}
	}
	slices.Sort(want)
	if l, _ := e.list("d/"); !slices.Equal(l.Names(), want) {
		t.Fatalf("before the reopen: d/ lists %d names, want %d", len(l.Names()), len(want))
	}
	e.reopen(diskOptions(t, dir, nil))
	l, n := e.list("d/")
	if !slices.Equal(l.Names(), want) || n != 0 {
		t.Fatalf("after the reopen: d/ lists %d names after %d requests; want %d, no request", len(l.Names()), n, len(want))
	}
	if c := l.Child("f498"); c.Kind != File || c.Attrs.Generation != 499 {
		t.Errorf("after the reopen: f498 is %+v, want generation 499", c)
	}
}
