package pending

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Names with bytes that sort just before and after '/' ('-', '.', '0'),
// placeholders (a name ending with '/') and nested directories.
var aroundSlash = []string{
	"a/b/c/d", "a0", "a.b", "a-b", "a/", "a/b", "a/b./y", "a/b.c", "a/b0/z",
	"a!/x", "ab", "a/b/", "a/b/c", "a/b-/q", "b/c/d/e", "a/b/c/d",
}

func namesOf(list ...string) *Names {
	var n Names
	for _, name := range list {
		n.Add(name)
	}
	return &n
}

// The names under a prefix are those that start with it, in byte order,
// whatever sorts around '/'.
func TestNamesUnder(t *testing.T) {
	n := namesOf(aroundSlash...)
	if err := n.Check(); err != nil {
		t.Fatal(err)
	}
	if n.Len() != len(aroundSlash)-1 { // "a/b/c/d" twice
		t.Fatalf("%d names, want %d", n.Len(), len(aroundSlash)-1)
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"a/", []string{"a/", "a/b", "a/b-/q", "a/b./y", "a/b.c", "a/b/", "a/b/c", "a/b/c/d", "a/b0/z"}},
		{"a/b/", []string{"a/b/", "a/b/c", "a/b/c/d"}},
		{"a/b", []string{"a/b", "a/b-/q", "a/b./y", "a/b.c", "a/b/", "a/b/c", "a/b/c/d", "a/b0/z"}},
		{"a", []string{"a!/x", "a-b", "a.b", "a/", "a/b", "a/b-/q", "a/b./y", "a/b.c", "a/b/", "a/b/c", "a/b/c/d", "a/b0/z", "a0", "ab"}},
		{"c/", nil},
		{"a/b/c/d/", nil},
	} {
		got := slices.Collect(n.Under(tc.prefix))
		if !slices.Equal(got, tc.want) {
			t.Errorf("Under(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
	if !n.Has("a/") || !n.Has("a/b./y") || n.Has("a/b.") || n.Has("c") {
		t.Error("Has does not tell the names")
	}
	// A range stopped early stops.
	for name := range n.Under("") {
		if name != "a!/x" {
			t.Errorf("the first name is %q", name)
		}
		break
	}
}

// The subdirectories of a directory are each once, in order, with the
// ones whose names sort around '/' told apart.
func TestNamesSubdirs(t *testing.T) {
	n := namesOf(aroundSlash...)
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a!/", "a/", "b/"}},
		{"a/", []string{"a/b-/", "a/b./", "a/b/", "a/b0/"}},
		{"a/b/", []string{"a/b/c/"}},
		{"a/b/c/", nil},
		{"b/", []string{"b/c/"}},
		{"c/", nil},
	} {
		got := slices.Collect(n.Subdirs(tc.prefix))
		if !slices.Equal(got, tc.want) {
			t.Errorf("Subdirs(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

// Prune calls keep on the names under its prefix in order, once each,
// and drops those it refuses from the names and their directories.
func TestNamesPrune(t *testing.T) {
	n := namesOf(aroundSlash...)
	var seen []string
	n.Prune("a/b", func(name string) bool {
		seen = append(seen, name)
		return name == "a/b" || name == "a/b/c/d"
	})
	if want := slices.Collect(namesOf(aroundSlash...).Under("a/b")); !slices.Equal(seen, want) {
		t.Errorf("keep saw %q, want %q", seen, want)
	}
	if err := n.Check(); err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Collect(n.Under("a/")), []string{"a/", "a/b", "a/b/c/d"}; !slices.Equal(got, want) {
		t.Errorf("after Prune, Under(a/) = %q, want %q", got, want)
	}
	if got, want := slices.Collect(n.Subdirs("a/")), []string{"a/b/"}; !slices.Equal(got, want) {
		t.Errorf("after Prune, Subdirs(a/) = %q, want %q", got, want)
	}
	n.Prune("a/b/c/", func(string) bool { return false })
	if got := slices.Collect(n.Subdirs("a/")); len(got) != 0 {
		t.Errorf("after the last name under a/b/ left, Subdirs(a/) = %q", got)
	}
	if got, want := slices.Collect(n.Subdirs("")), []string{"a!/", "a/", "b/"}; !slices.Equal(got, want) {
		t.Errorf("Subdirs() = %q, want %q", got, want)
	}
	n.Add("a/b/c/d")
	if got, want := slices.Collect(n.Subdirs("a/b/")), []string{"a/b/c/"}; !slices.Equal(got, want) || n.Check() != nil {
		t.Errorf("added again: Subdirs(a/b/) = %q, want %q; %v", got, want, n.Check())
	}
	n.Prune("", func(string) bool { return true })
	if err := n.Check(); err != nil || n.Len() != len(aroundSlash)-1-6 {
		t.Errorf("a Prune keeping all: %d names, %v", n.Len(), err)
	}
}

// Random names over bytes around '/', added and pruned at random, answer
// as a plain scan of them does.
func TestNamesAgainstAScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 1))
	alphabet := "a-./0"
	randName := func() string {
		b := make([]byte, 1+rng.IntN(7))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	var n Names
	set := map[string]bool{}
	for round := 0; round < 300; round++ {
		for range 5 {
			name := randName()
			n.Add(name)
			set[name] = true
		}
		if round%3 == 0 {
			prefix := randName()
			prefix = prefix[:min(len(prefix), 1+rng.IntN(2))]
			n.Prune(prefix, func(name string) bool {
				if rng.IntN(2) == 0 {
					delete(set, name)
					return false
				}
				return true
			})
		}
		if err := n.Check(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		all := slices.Sorted(func(yield func(string) bool) {
			for name := range set {
				if !yield(name) {
					return
				}
			}
		})
		for _, prefix := range []string{"", "a/", "-/", "./", "a./", "a0/", "/", randName() + "/"} {
			var under []string
			var subs []string
			for _, name := range all {
				if !strings.HasPrefix(name, prefix) {
					continue
				}
				under = append(under, name)
				if j := strings.IndexByte(name[len(prefix):], '/'); j >= 0 {
					if sub := name[:len(prefix)+j+1]; !slices.Contains(subs, sub) {
						subs = append(subs, sub)
					}
				}
			}
			slices.Sort(subs)
			if got := slices.Collect(n.Under(prefix)); !slices.Equal(got, under) {
				t.Fatalf("round %d: Under(%q) = %q, want %q", round, prefix, got, under)
			}
			if got := slices.Collect(n.Subdirs(prefix)); !slices.Equal(got, subs) {
				t.Fatalf("round %d: Subdirs(%q) = %q, want %q", round, prefix, got, subs)
			}
		}
	}
}

// Check tells a broken index.
func TestNamesCheck(t *testing.T) {
	n := namesOf("a/b", "c")
	n.idx[0], n.idx[1] = n.idx[1], n.idx[0]
	if n.Check() == nil {
		t.Error("unsorted names not reported")
	}
	n = namesOf("a/b", "c")
	n.dirs.count["a/"]++
	if n.Check() == nil {
		t.Error("a directory miscounted not reported")
	}
	n = namesOf("a/b", "c")
	n.idx = n.idx[1:]
	if n.Check() == nil {
		t.Error("a directory of no name not reported")
	}
}
