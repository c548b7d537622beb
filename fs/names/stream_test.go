package names

import (
	"fmt"
	"math/rand"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/transfer"
)

// A cold listing of more names than a page holds shows its first names
// while the rest of it is still being listed (the bucket holds every
// request for a name range until the test has seen them), and in the end
// every child once, as List has them: a file hidden by a directory of its
// name is not shown, a subdirectory a range began inside of shows once,
// and the local changes are laid over (a name deleted here is not shown,
// one written here shows with its local size, one only here shows).
func TestStreamShowsFirstNamesWhileTheRestComes(t *testing.T) {
	e := newEnvOn(t, Options{TTL: time.Hour}, emulator.Options{Buckets: []string{bucketName}, Seeded: true})
	var seeds []emulator.Seed
	add := func(name string) { seeds = append(seeds, emulator.Seed{Name: name, Data: []byte("x")}) }
	for i := range 3000 {
		add(fmt.Sprintf("big/f%05d", i))
		if i%37 == 0 {
			for j := range 30 {
				add(fmt.Sprintf("big/f%05d.d/x%02d", i, j))
			}
		}
	}
	add("big/f00101.p/")  // a placeholder of an empty subdirectory
	add("big/f00074/y")   // hides the file big/f00074
	add("big/f00074.txt") // between the file and the directory in name order
	if _, err := e.emu.PutMany(bucketName, slices.Values(seeds)); err != nil {
		t.Fatal(err)
	}
	e.local.mu.Lock()
	e.local.removed["big/f00010"] = true
	e.local.present["big/f00020"] = transfer.ObjectAttrs{Name: "big/f00020", Size: 999}
	e.local.present["big/only-here"] = transfer.ObjectAttrs{Name: "big/only-here", Size: 5}
	e.local.mu.Unlock()

	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		if r.URL.Query().Get("startOffset") != "" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		return 0, false
	})
	t.Cleanup(func() { e.emu.SetHook(nil) })

	const early = 500
	var mu sync.Mutex
	var shown []string
	kinds := map[string]Entry{}
	sawEarly := make(chan struct{})
	remembered := false
	type result struct {
		l   *Listing
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := e.m.Stream(e.ctx, "big/", e.warn, func(seg string, c Entry) {
			mu.Lock()
			defer mu.Unlock()
			shown = append(shown, seg)
			kinds[seg] = c
			if len(shown) == early {
				close(sawEarly)
			}
		}, func() {
			mu.Lock()
			defer mu.Unlock()
			if len(shown) < early {
				t.Errorf("told the listing is in memory after %d names, while the rest was held", len(shown))
			}
			remembered = true
		})
		done <- result{l, err}
	}()
	select {
	case <-sawEarly:
	case r := <-done:
		t.Fatalf("the listing ended (err %v) with the name ranges held", r.err)
	case <-e.ctx.Done():
		t.Fatalf("%d names shown while the rest of the listing was held; want %d", len(shown), early)
	}
	releaseOnce.Do(func() { close(release) })
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}

	mu.Lock()
	defer mu.Unlock()
	if !remembered {
		t.Error("never told the listing is in memory")
	}
	seen := map[string]bool{}
	for _, seg := range shown {
		if seen[seg] {
			t.Errorf("%s shown twice", seg)
		}
		seen[seg] = true
	}
	want := r.l.Names()
	if len(shown) != len(want) {
		t.Errorf("%d names shown, the listing has %d", len(shown), len(want))
	}
	for _, seg := range want {
		if !seen[seg] {
			t.Errorf("%s in the listing, never shown", seg)
		} else if kinds[seg].Kind != r.l.Child(seg).Kind {
			t.Errorf("%s shown as kind %v, the listing has %v", seg, kinds[seg].Kind, r.l.Child(seg).Kind)
		}
	}
	for seg, kind := range map[string]Kind{"f00074": Dir, "f00037.d": Dir, "f00101.p": Dir, "f00074.txt": File, "f00011": File, "only-here": File, "f00010": None} {
		if kinds[seg].Kind != kind {
			t.Errorf("%s shown as kind %v, want %v", seg, kinds[seg].Kind, kind)
		}
	}
	if kinds["f00020"].Attrs.Size != 999 {
		t.Errorf("f00020 shown with size %d, want its local size 999", kinds["f00020"].Attrs.Size)
	}
	if !e.warnedAbout("big/f00074") {
		t.Error("the file hidden by a directory of its name was not reported")
	}
	// The listing is remembered: List asks nobody for it (the
	// subdirectories are being listed ahead meanwhile).
	var asked atomic.Int64
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		if r.URL.Query().Get("prefix") == "big/" {
			asked.Add(1)
		}
		return 0, false
	})
	if l, _ := e.list("big/"); len(l.Names()) != len(want) || asked.Load() != 0 {
		t.Errorf("List after Stream: %d names, %d requests for them; want %d, 0", len(l.Names()), asked.Load(), len(want))
	}
}

// Streams of levels of random shapes show what List shows, each name
// once with List's kind: files hidden by directories of their name (with
// names such as "x.txt" and "x-y" between them in byte order),
// subdirectories with many names (which ranges begin inside of),
// placeholders, and local changes over them.
func TestStreamShowsWhatListShows(t *testing.T) {
	e := newEnvOn(t, Options{TTL: time.Hour}, emulator.Options{Buckets: []string{bucketName}, Seeded: true})
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	const alpha = "-.0a~/" // bytes around '/' in order: '-' and '.' sort before it, '0', 'a', '~' after
	for round := range 6 {
		prefix := fmt.Sprintf("r%d/", round)
		set := map[string]bool{}
		for len(set) < 3000+rng.Intn(4000) {
			var sb strings.Builder
			sb.WriteString(prefix)
			for k := 1 + rng.Intn(7); k > 0; k-- {
				c := alpha[rng.Intn(len(alpha)-1)]
				if rng.Intn(20) == 0 {
					c = '/' // a name in a subdirectory, now and then
				}
				sb.WriteByte(c)
			}
			name := sb.String()
			if strings.Contains(name, "//") || strings.HasSuffix(name, "/") && rng.Intn(4) != 0 {
				continue
			}
			set[name] = true
		}
		var seeds []emulator.Seed
		for name := range set {
			seeds = append(seeds, emulator.Seed{Name: name, Data: []byte("x")})
		}
		if _, err := e.emu.PutMany(bucketName, slices.Values(seeds)); err != nil {
			t.Fatal(err)
		}
		e.local.mu.Lock()
		for name := range set {
			switch rng.Intn(40) {
			case 0:
				e.local.removed[name] = true
			case 1:
				e.local.present[name] = transfer.ObjectAttrs{Name: name, Size: 7}
			}
		}
		e.local.present[prefix+"local-only"] = transfer.ObjectAttrs{Name: prefix + "local-only", Size: 3}
		e.local.mu.Unlock()

		shown := map[string]Entry{}
		beforeEnd := 0 // shown before the listing was whole
		l, err := e.m.Stream(e.ctx, prefix, e.warn, func(seg string, c Entry) {
			if _, ok := shown[seg]; ok {
				t.Errorf("round %d: %q shown twice", round, seg)
			}
			shown[seg] = c
		}, func() { beforeEnd = len(shown) })
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d names in the level, %d shown while it was listed", round, len(shown), beforeEnd)
		want := e.m.withLocal(prefix, l)
		if len(shown) != want.Len() {
			t.Errorf("round %d: %d names shown, List has %d", round, len(shown), want.Len())
		}
		for _, seg := range want.Names() {
			c, ok := shown[seg]
			switch {
			case !ok:
				t.Errorf("round %d: %q not shown", round, seg)
			case c.Kind != want.Child(seg).Kind || c.Kind == File && c.Attrs.Size != want.Child(seg).Attrs.Size:
				t.Errorf("round %d: %q shown as %v (%d bytes), List has %v (%d bytes)", round, seg,
					c.Kind, c.Attrs.Size, want.Child(seg).Kind, want.Child(seg).Attrs.Size)
			}
		}
	}
}

// streamRootDuring streams the root's listing cold, with change run
// once while the bucket's answer to its listing is on its way; it
// returns the children shown, sorted, and the listing.
func (e *env) streamRootDuring(change func()) ([]string, *Listing) {
	e.t.Helper()
	ran := e.during(func(r *http.Request) bool {
		return r.Method == http.MethodGet && r.URL.Query().Has("delimiter") && r.URL.Query().Get("prefix") == ""
	}, change)
	var mu sync.Mutex
	var shown []string
	l, err := e.m.Stream(e.ctx, "", e.warn, func(seg string, c Entry) {
		mu.Lock()
		shown = append(shown, seg)
		mu.Unlock()
	}, func() {})
	if err != nil {
		e.t.Fatal(err)
	}
	if !ran() {
		e.t.Fatal("the change did not run during the listing")
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(shown)
	return shown, l
}

// A directory made here whose placeholder is confirmed while a cold
// listing of its parent is on its way (the bucket answered without it,
// the overlay no longer has it when the listing is laid over) is still
// shown: the listing, not remembered, is corrected with what was
// confirmed since it was asked, for directories as for files (found by
// TestNonUTF8Names under load: a mkdir's directory missing from ls).
func TestStreamShowsADirectoryConfirmedMeanwhile(t *testing.T) {
	e := newEnv(t, time.Hour)
	e.put("f", "x")
	e.local.mu.Lock()
	e.local.present["d/"] = transfer.ObjectAttrs{Name: "d/"}
	e.local.mu.Unlock()
	shown, l := e.streamRootDuring(func() {
		gen, err := e.emu.Put(bucketName, "d/", nil)
		if err != nil {
			t.Error(err)
			return
		}
		e.m.Confirmed("d/", transfer.ObjectAttrs{Name: "d/", Generation: gen}, false) // the mkdir's upload ends
		e.local.mu.Lock()
		delete(e.local.present, "d/") // and leaves the overlay
		e.local.mu.Unlock()
	})
	if !slices.Equal(shown, []string{"d", "f"}) || l.Child("d").Kind != Dir {
		t.Errorf("the root streams %v and lists d as %v; want [d f], d a directory", shown, l.Child("d").Kind)
	}
}

// The same for a directory removed here (rmdir): its placeholder's
// deletion confirmed while a cold listing of its parent is on its way
// (the bucket answered with it, the overlay no longer removes it), the
// listing does not show it.
func TestStreamHidesADirectoryRemovedMeanwhile(t *testing.T) {
	e := newEnv(t, time.Hour)
	e.put("f", "x")
	e.put("d/", "")
	e.local.mu.Lock()
	e.local.removed["d/"] = true
	e.local.mu.Unlock()
	shown, l := e.streamRootDuring(func() {
		if err := e.emu.Delete(bucketName, "d/"); err != nil {
			t.Error(err)
			return
		}
		e.m.Confirmed("d/", transfer.ObjectAttrs{}, true) // the rmdir's deletion ends
		e.local.mu.Lock()
		delete(e.local.removed, "d/") // and leaves the overlay
		e.local.mu.Unlock()
	})
	if !slices.Equal(shown, []string{"f"}) || l.Child("d").Kind != None {
		t.Errorf("the root streams %v and lists d as %v; want [f], no d", shown, l.Child("d").Kind)
	}
}
