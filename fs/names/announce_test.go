package names

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// file returns attributes of version gen of name, as an announcement's
// payload carries them.
func file(name string, gen, size int64) transfer.ObjectAttrs {
	return transfer.ObjectAttrs{Name: name, Generation: gen, Metageneration: 1, Size: size}
}

// Announcements change what is known without a request: a new file shows
// in its directory's listing and on lookup, an overwrite shows the new
// generation, a deletion removes it, and the names are noted changed
// (the kernel is told).
func TestAnnounceAppliesWithoutRequests(t *testing.T) {
	e := newEnv(t, time.Minute)
	var mu sync.Mutex
	var noted []string
	e.m.OnChange(func(name string) { mu.Lock(); noted = append(noted, name); mu.Unlock() })
	e.put("d/a", "a")
	e.list("d/")
	before := e.emu.Requests()
	if out := e.m.Announce(Announcement{Object: file("d/b", 5, 3), Full: true}); out != Applied {
		t.Fatalf("new file: %v", out)
	}
	if l, _ := e.list("d/"); !slices.Equal(l.Names(), []string{"a", "b"}) {
		t.Errorf("d/ lists %v after d/b was announced, want [a b]", l.Names())
	}
	if c, _ := e.resolve("d/b"); c.Kind != File || c.Attrs.Generation != 5 {
		t.Errorf("d/b = %+v, want generation 5", c)
	}
	e.m.Announce(Announcement{Object: file("d/b", 7, 4), Full: true})
	if c, _ := e.resolve("d/b"); c.Attrs.Generation != 7 || c.Attrs.Size != 4 {
		t.Errorf("d/b after an overwrite = %+v, want generation 7", c)
	}
	e.m.Announce(Announcement{Object: file("d/b", 7, 0), Deleted: true})
	if l, _ := e.list("d/"); !slices.Equal(l.Names(), []string{"a"}) {
		t.Errorf("d/ lists %v after d/b was deleted, want [a]", l.Names())
	}
	if n := e.emu.Requests() - before; n != 0 {
		t.Errorf("%d requests to the bucket, want none", n)
	}
	e.m.Close()
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(noted, "d/b") {
		t.Errorf("names noted changed %v, want d/b among them", noted)
	}
}

// In any order and any number of times, announcements end in the state
// the last change made: an older one is stale, a repeated one a
// duplicate, and a deletion is final for its generation (its upload,
// announced after it, does not bring it back).
func TestAnnounceByGeneration(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.list("d/")
	check := func(what string, got, want Outcome) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	check("create 5", e.m.Announce(Announcement{Object: file("d/f", 5, 1), Full: true}), Applied)
	check("create 5 again", e.m.Announce(Announcement{Object: file("d/f", 5, 1), Full: true}), Duplicate)
	check("overwrite 9", e.m.Announce(Announcement{Object: file("d/f", 9, 2), Full: true}), Applied)
	check("create 5, late", e.m.Announce(Announcement{Object: file("d/f", 5, 1), Full: true}), Stale)
	check("delete 5, late", e.m.Announce(Announcement{Object: file("d/f", 5, 0), Deleted: true}), Stale)
	if c, _ := e.resolve("d/f"); c.Attrs.Generation != 9 {
		t.Errorf("d/f = %+v, want generation 9", c)
	}
	// A deletion before the create of its generation.
	check("delete 12", e.m.Announce(Announcement{Object: file("d/g", 12, 0), Deleted: true}), Applied)
	check("create 12, after its deletion", e.m.Announce(Announcement{Object: file("d/g", 12, 1), Full: true}), Stale)
	check("delete 12 again", e.m.Announce(Announcement{Object: file("d/g", 12, 0), Deleted: true}), Duplicate)
	if l, _ := e.list("d/"); !slices.Equal(l.Names(), []string{"f"}) {
		t.Errorf("d/ lists %v, want [f]", l.Names())
	}
	// A metadata change: the same generation, a higher metageneration.
	m2 := file("d/f", 9, 2)
	m2.Metageneration, m2.Metadata = 2, map[string]string{"k": "v"}
	check("metadata 9.2", e.m.Announce(Announcement{Object: m2, Full: true, Meta: true}), Applied)
	check("create 9.1, late", e.m.Announce(Announcement{Object: file("d/f", 9, 2), Full: true}), Stale)
	if c, _ := e.resolve("d/f"); c.Attrs.Metadata["k"] != "v" {
		t.Errorf("d/f = %+v, want the new metadata", c)
	}
}

// An implicit directory comes with the first object under it and goes
// with its last, in the listing above it.
func TestAnnounceImplicitDirectories(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.list("")
	e.m.Announce(Announcement{Object: file("new/deep/f", 3, 1), Full: true})
	if l, _ := e.list(""); !slices.Contains(l.Names(), "new") {
		t.Errorf("the root lists %v, want new", l.Names())
	}
	if l, _ := e.list("new/deep/"); !slices.Equal(l.Names(), []string{"f"}) {
		t.Errorf("new/deep/ lists %v, want [f]", l.Names())
	}
	e.clock.advance(time.Second) // later than the listings above
	e.m.Announce(Announcement{Object: file("new/deep/f", 3, 0), Deleted: true})
	if l, _ := e.list("new/deep/"); l.Len() != 0 {
		t.Errorf("new/deep/ lists %v, want nothing", l.Names())
	}
	if l, _ := e.list("new/"); slices.Contains(l.Names(), "deep") {
		t.Errorf("new/ lists %v after its last object went, want no deep", l.Names())
	}
}

// While announcements are live (Trust), what was asked since is trusted
// past the TTL: no request. Off, the TTL holds again at once; back on
// after a break, what was known before is asked again.
func TestTrustWhileLive(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.put("d/f", "x")
	e.m.Trust(true, e.clock.now())
	e.list("d/")
	e.resolve("d/f")
	e.clock.advance(10 * time.Minute)
	if _, n := e.list("d/"); n != 0 {
		t.Errorf("a listing past the TTL, trusted: %d requests, want 0", n)
	}
	if _, n := e.resolve("d/f"); n != 0 {
		t.Errorf("a lookup past the TTL, trusted: %d requests, want 0", n)
	}
	e.m.Trust(false, time.Time{})
	e.list("d/") // past the TTL: answered, refreshed in the background
	e.settle()
	if _, n := e.list("d/"); n != 0 {
		t.Errorf("after the refresh: %d requests, want 0", n)
	}
	e.clock.advance(2 * time.Minute)
	e.m.Trust(true, e.clock.now()) // back after a break
	e.list("d/")
	e.settle()
	if _, n := e.list("d/"); n != 0 {
		t.Errorf("the listing refreshed since the stream came back: %d requests, want 0", n)
	}
}
