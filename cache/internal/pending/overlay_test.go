package pending

import (
	"slices"
	"testing"
)

// changes tells each name its Change from a map: the names not in it are
// Clean.
func changes(m map[string]Change) func(string) Change {
	return func(name string) Change { return m[name] }
}

// Changes splits the names under a prefix into written and deleted, and
// drops the clean ones from the index.
func TestNamesChanges(t *testing.T) {
	n := namesOf("a/x", "a/y", "a/z", "a/d/", "a/d/f", "b")
	ch := changes(map[string]Change{"a/x": Written, "a/z": Deleted, "a/d/f": Written, "b": Written})
	present, removed := n.Changes("a/", ch)
	if !slices.Equal(present, []string{"a/d/f", "a/x"}) || !slices.Equal(removed, []string{"a/z"}) {
		t.Errorf("Changes(a/) = %q, %q", present, removed)
	}
	if n.Has("a/y") || n.Has("a/d/") || !n.Has("a/x") || !n.Has("b") {
		t.Errorf("Changes kept a clean name or dropped a changed one: %q", slices.Collect(n.Under("")))
	}
	if err := n.Check(); err != nil {
		t.Fatal(err)
	}
}

// ChangedUnder counts any change under a prefix but the prefix's own.
func TestNamesChangedUnder(t *testing.T) {
	n := namesOf("d/", "d/a", "d/b", "e")
	for _, tc := range []struct {
		m    map[string]Change
		want bool
	}{
		{map[string]Change{"d/": Deleted, "e": Written}, false},
		{map[string]Change{"d/": Deleted, "d/b": Deleted}, true},
		{map[string]Change{"d/a": Written}, true},
		{nil, false},
	} {
		if got := n.ChangedUnder("d/", changes(tc.m)); got != tc.want {
			t.Errorf("ChangedUnder(d/) with %v = %v, want %v", tc.m, got, tc.want)
		}
	}
}

// A subdirectory is made by a name written under it; else removed if its
// placeholder is deleted; else neither, however its other names stand.
func TestNamesSubdirChanges(t *testing.T) {
	n := namesOf("p/made/", "p/made/f", "p/gone/", "p/gone/f", "p/clean/f", "p/left/f", "p/x", "q/r/s")
	ch := changes(map[string]Change{
		"p/made/": Deleted, "p/made/f": Written, // a placeholder deleted, a file written: made
		"p/gone/": Deleted, "p/gone/f": Deleted, // all deleted: gone
		"p/left/f": Deleted, // a file deleted, no placeholder deleted: neither
		"p/x":      Written, // directly in p: no subdirectory
		"q/r/s":    Written,
	})
	present, removed := n.SubdirChanges("p/", ch)
	if !slices.Equal(present, []string{"made"}) || !slices.Equal(removed, []string{"gone"}) {
		t.Errorf("SubdirChanges(p/) = %q, %q", present, removed)
	}
	if present, _ := n.SubdirChanges("", ch); !slices.Equal(present, []string{"p", "q"}) {
		t.Errorf("SubdirChanges() = %q", present)
	}
	if n.Len() != 8 {
		t.Errorf("SubdirChanges changed the index: %d names", n.Len())
	}
}
