package integration

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil/testemu"
)

// TestBigListingInRanges: a directory of more names than a page holds
// is listed in name ranges at once (transfer.ListAll, issue 35); every
// name shows once, whichever range it fell in: files, subdirectories
// (a range may begin inside one, which then is on two pages),
// subdirectories with a placeholder object, and a file hidden by a
// directory of the same name.
func TestBigListingInRanges(t *testing.T) {
	const files = 5000
	emu := testemu.Start(t, emulator.Options{Buckets: []string{testBucket}, Seeded: true})
	var seeds []emulator.Seed
	want := map[string]bool{}
	add := func(name string) { seeds = append(seeds, emulator.Seed{Name: name, Data: []byte("x\n")}) }
	for i := range files {
		add(fmt.Sprintf("big/f%05d", i))
		want[fmt.Sprintf("f%05d", i)] = true
		if i%37 == 0 {
			// A subdirectory whose many objects span ranges.
			for j := range 30 {
				add(fmt.Sprintf("big/f%05d.d/x%02d", i, j))
			}
			want[fmt.Sprintf("f%05d.d", i)] = true
		}
		if i%101 == 0 {
			add(fmt.Sprintf("big/f%05d.p/", i)) // a placeholder, nothing under it
			want[fmt.Sprintf("f%05d.p", i)] = true
		}
	}
	add("big/f00074/y") // the file big/f00074 is hidden behind this directory
	if _, err := emu.PutMany(testBucket, slices.Values(seeds)); err != nil {
		t.Fatal(err)
	}
	m := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", "1h"}})
	ents, err := os.ReadDir(m.path("big"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range ents {
		if seen[e.Name()] {
			t.Errorf("%s listed twice", e.Name())
		}
		seen[e.Name()] = true
		if !want[e.Name()] {
			t.Errorf("%s listed, not in the bucket", e.Name())
		}
		if wantDir := e.Name() == "f00074" || len(e.Name()) > 6; e.IsDir() != wantDir {
			t.Errorf("%s: directory %v, want %v", e.Name(), e.IsDir(), wantDir)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("%s missing from the listing", name)
		}
	}
	if len(ents) != len(want) {
		t.Errorf("%d entries, want %d", len(ents), len(want))
	}
}
