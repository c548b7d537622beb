package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil/testemu"
)

// The walk section (issue 35): cold walks of names, with and without the
// WAN profile, beside a go-fuse loopback mount of the same tree on local
// disk (the floor: FUSE and the commands alone). A bucket in the
// emulator's seeded store holds tree/ (200 directories of 1,000 objects,
// the shape of an image dataset a loader walks), big/ (100,000 objects in
// one directory) and million/ (1,000 directories of 1,000). Each command
// runs on a fresh mount (a new cache: nothing known), default flags but
// --metadata-ttl 1h; the loopback's tree is on the disk of the test's
// temporary directories, in the page cache (it was just made), on a fresh
// loopback mount each time.

// walkTree is one tree of the walk section: dirs directories of each
// objects under prefix, or one directory of each if dirs is 0.
type walkTree struct {
	prefix     string
	dirs, each int
}

func (w walkTree) count() int { return max(w.dirs, 1) * w.each }

func (w walkTree) name(i int) string {
	if w.dirs == 0 {
		return fmt.Sprintf("%s/f%06d", w.prefix, i)
	}
	return fmt.Sprintf("%s/d%04d/f%04d", w.prefix, i/w.each, i%w.each)
}

// makeLocal makes w's files, empty, under root.
func (w walkTree) makeLocal(t *testing.T, root string) {
	made := map[string]bool{}
	for i := range w.count() {
		p := filepath.Join(root, w.name(i))
		if d := filepath.Dir(p); !made[d] {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			made[d] = true
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// firstNames prints the first 100 names of big as readdir(3) gives them
// (glibc reads a directory 32 KiB at a time).
const firstNames = `perl -e 'opendir(my $d, "big") or die "big: $!"; for (1 .. 100) { print scalar(readdir($d)), "\n" }'`

func benchWalk(t *testing.T, cfg benchConfig, tbl *benchTable) []string {
	tree := walkTree{"tree", 200, 1000}
	big := walkTree{"big", 0, 100_000}
	million := walkTree{"million", 1000, 1000}
	emu := testemu.Start(t, emulator.Options{Buckets: []string{testBucket}, Seeded: true})
	local := t.TempDir()
	for _, w := range []walkTree{tree, big, million} {
		if _, err := emu.PutMany(testBucket, seedNames(w.count(), w.name)); err != nil {
			t.Fatal(err)
		}
		w.makeLocal(t, local)
	}
	wan := emulator.DefaultWAN()
	type walk struct {
		name, cmd string
		lines     int
		withWAN   bool
		target    string
		goal      float64 // seconds, or times the floor without the WAN profile; 0: none
	}
	walks := []walk{
		{"walk: cold find -type f over 200 x 1,000, WAN profile", "find tree -type f", tree.count(), true, "<= 4 s", 4},
		{"walk: cold ls -f of 100,000, WAN profile", "ls -f big", big.count() + 2, true, "<= 3 s", 3},
		// ls reads the whole directory before it prints: the first names
		// as a reader that takes them as they come (readdir) gets them.
		{"walk: cold first 100 names of 100,000 (readdir), WAN profile", firstNames, 100, true, "-", 0},
		{"walk: cold find -type f over 1,000 x 1,000, WAN profile", "find million -type f", million.count(), true, "RSS <= 400 MiB", 0},
		{"walk: cold find -type f over 200 x 1,000, no WAN", "find tree -type f", tree.count(), false, "-", 0},
		{"walk: cold ls -f of 100,000, no WAN", "ls -f big", big.count() + 2, false, "<= 2x loopback", 2},
		{"walk: cold find -type f over 1,000 x 1,000, no WAN", "find million -type f", million.count(), false, "RSS <= 400 MiB", 0},
	}
	for _, w := range walks {
		if w.withWAN {
			emu.SetWAN(&wan)
		} else {
			emu.SetWAN(nil)
		}
		var secs, rss, floor []float64
		for range cfg.repeat {
			m, err := spawnMount(t, emu, mountOpts{args: []string{"--metadata-ttl", "1h"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.waitReady(); err != nil {
				t.Fatal(err)
			}
			s := runOnMount(t, m, w.cmd, 10*time.Minute)
			m.unmount(t)
			if s.lines != w.lines {
				t.Fatalf("%s: %d lines, want %d", w.cmd, s.lines, w.lines)
			}
			secs, rss = append(secs, s.secs), append(rss, s.rss)
			if !w.withWAN {
				lm := mountLoopback(t, local)
				fs, n := runIn(t, lm.dir, w.cmd, 10*time.Minute)
				lm.unmount(t)
				if n != w.lines {
					t.Fatalf("%s on the loopback mount: %d lines, want %d", w.cmd, n, w.lines)
				}
				floor = append(floor, fs)
			}
		}
		s, r := median(secs), median(rss)
		row := benchRow{
			name: w.name, native: "-", bucketfs: fmt.Sprintf("%ss, RSS %s MiB", fmtSec(s), fmtNum(r)), ratio: "-",
			target: w.target, note: fmt.Sprintf("medians of %d, each on a fresh mount; every name listed", cfg.repeat),
		}
		met := r <= 400
		switch {
		case len(floor) > 0:
			f := median(floor)
			row.native, row.ratio = fmtSec(f)+"s (loopback)", fmtRatio(s/f)+"x"
			met = met && (w.goal == 0 || s <= w.goal*f)
		case w.goal > 0:
			met = met && s <= w.goal
		}
		row.met = metStr(met)
		tbl.add(row)
	}
	emu.SetWAN(nil)
	return []string{"walk: the emulator's seeded store; the WAN profile is the bench's (30 ms before each response, 25 MiB/s a connection, 200 MiB/s in all); " +
		"the native column is a go-fuse loopback mount (fs.NewLoopbackRoot, served by the test process) of the same tree of empty files on local disk, already in the page cache"}
}
