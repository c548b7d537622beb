package holds

import (
	"testing"
	"time"
)

// A name's holds go with the last release, which says so; a prefix held
// covers the names under it and overlaps prefixes over and under it.
func TestCountsAndPrefixes(t *testing.T) {
	var c Counts
	c.Add("a/x")
	c.Add("a/x")
	if c.Held("a/x") != 2 || !c.AnyUnder("a/") || c.AnyUnder("b/") {
		t.Fatalf("after two holds: %v", c.Map())
	}
	if c.Release("a/x") || !c.Release("a/x") || c.Held("a/x") != 0 || len(c.Map()) != 0 {
		t.Fatalf("the last release did not end the holds: %v", c.Map())
	}
	var s Prefixes
	s.Add("a/b/", "c/")
	s.Add("c/")
	if !s.Covers("a/b/x") || s.Covers("a/bx") || !s.Overlaps("a/") || !s.Overlaps("a/b/c/") || s.Overlaps("b/") {
		t.Fatalf("covers or overlaps wrong")
	}
	s.Remove("c/")
	if !s.Covers("c/x") {
		t.Fatalf("a prefix held twice went with one release")
	}
	s.Remove("c/", "a/b/")
	for p, n := range s.All() {
		t.Fatalf("prefix %q left, counted %d", p, n)
	}
}

// A made copy is remembered for MadeCopyKeep, forgotten on Forget, and
// the set stays bounded.
func TestMadeCopies(t *testing.T) {
	var m MadeCopies
	now := time.Now()
	m.Remember("x", 7, now)
	if g := m.Get("x", now.Add(MadeCopyKeep)); g != 7 {
		t.Fatalf("Get within the keep = %d", g)
	}
	if g := m.Get("x", now.Add(MadeCopyKeep+time.Millisecond)); g != 0 {
		t.Fatalf("Get past the keep = %d", g)
	}
	m.Remember("y", 8, now)
	m.Forget("y")
	if g := m.Get("y", now); g != 0 {
		t.Fatalf("Get after Forget = %d", g)
	}
	for i := range MadeCopiesMax + 10 {
		m.Remember(string(rune('a'+i%26))+time.Duration(i).String(), int64(i), now)
	}
	if n := len(m.m); n > MadeCopiesMax {
		t.Fatalf("%d copies remembered, more than %d", n, MadeCopiesMax)
	}
}
