package fs

import (
	"slices"
	"testing"
)

// The index of file nodes by name: a node is in it once however often
// it is tracked, a name with no node left is gone from it, and what
// nodesNamed returns is the caller's own.
func TestTrackedNodes(t *testing.T) {
	f := &FS{nodes: map[string][]*fileNode{}}
	a := &fileNode{fsys: f, name: "d/x"}
	b := &fileNode{fsys: f, name: "d/x"}
	f.track(a)
	f.track(a)
	f.track(b)
	if got := f.nodesNamed("d/x"); len(got) != 2 || !slices.Contains(got, a) || !slices.Contains(got, b) {
		t.Fatalf("nodesNamed = %v, want a and b once each", got)
	}
	got := f.nodesNamed("d/x")
	got[0] = nil // the caller's copy
	f.untrack(a, "d/x")
	if got := f.nodesNamed("d/x"); !slices.Equal(got, []*fileNode{b}) {
		t.Fatalf("after untrack(a): %v, want [b]", got)
	}
	f.untrack(b, "d/x")
	if _, ok := f.nodes["d/x"]; ok || len(f.nodesNamed("d/x")) != 0 {
		t.Fatalf("the name stays in the index with no node: %v", f.nodes)
	}
}
