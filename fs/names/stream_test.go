package names

import (
	"fmt"
	"net/http"
	"slices"
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
