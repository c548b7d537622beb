package names

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// A listing of a directory deep under one renamed while the listing was
// on its way must not be kept: it predates the rename, and would show
// the moved files at their old names for the TTL. The rename counts no
// change in that directory (only in the two parents), so only the log
// of forgotten subtrees catches it.
func TestListingDuringARenameAboveIsNotKept(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.put("d/s/x/f", "x")
	ran := e.during(func(r *http.Request) bool {
		return r.Method == http.MethodGet && r.URL.Query().Get("prefix") == "d/s/x/"
	}, func() {
		// d/s/ renamed to e/ here, the bucket changed with it.
		if err := e.emu.Delete(bucketName, "d/s/x/f"); err != nil {
			t.Error(err)
		}
		if _, err := e.emu.Put(bucketName, "e/x/f", []byte("x")); err != nil {
			t.Error(err)
		}
		e.m.DirRenamed("d/s/", "e/")
	})
	e.list("d/s/x/")
	if !ran() {
		t.Fatal("the hook did not run")
	}
	if l, n := e.list("d/s/x/"); l.Len() != 0 {
		t.Errorf("after the rename d/s/x/ lists %v (%d requests); want nothing: the listing asked before the rename was kept", l.Names(), n)
	}
}

// forgetLog tells the forgets that touch a directory from those that do
// not, and takes an answer that ran across more than it keeps as touched.
func TestForgetLog(t *testing.T) {
	var f forgetLog
	seq := f.seq
	f.note("a/b/")
	cases := []struct {
		dir  string
		want bool
	}{
		{"a/b/", true},   // the subtree itself
		{"a/b/c/", true}, // under it
		{"a/", true},     // its parent's listing notes a/b/'s placeholder
		{"a/bc/", false}, // a sibling whose name begins alike
		{"", false},      // the root holds a/, not a/b/
		{"x/", false},    // elsewhere
	}
	for _, c := range cases {
		if got := f.since(seq, c.dir); got != c.want {
			t.Errorf("after forgetting a/b/, since(%q) = %v; want %v", c.dir, got, c.want)
		}
	}
	if f.since(f.seq, "a/b/") {
		t.Error("a stamp read after the forget is touched by it")
	}
	for i := range forgetLogLen {
		f.note(fmt.Sprintf("z%d/", i))
	}
	if !f.since(seq, "x/") {
		t.Error("an answer that ran across more forgets than the log keeps is taken as untouched")
	}
	if f.since(seq+1, "x/") {
		t.Error("a forget still in the log is taken as touching x/")
	}
	if len(f.recent) != forgetLogLen || !slices.Contains(f.recent, "z0/") {
		t.Errorf("the log keeps %d (%v...); want the newest %d", len(f.recent), f.recent[:1], forgetLogLen)
	}
}
