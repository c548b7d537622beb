package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil/testemu"
)

// The walk section (issue 35): cold walks of names, with and without the
// WAN profile. A bucket in the emulator's seeded store holds tree/ (200
// directories of 1,000 objects, the shape of an image dataset a loader
// walks) and big/ (100,000 objects in one directory). Each command runs
// on a fresh mount (a new cache: nothing known), default flags but
// --metadata-ttl 1h.

func benchWalk(t *testing.T, cfg benchConfig, tbl *benchTable) []string {
	emu := testemu.Start(t, emulator.Options{Buckets: []string{testBucket}, Seeded: true})
	if _, err := emu.PutMany(testBucket, seedNames(200*1000, func(i int) string { return fmt.Sprintf("tree/d%04d/f%04d", i/1000, i%1000) })); err != nil {
		t.Fatal(err)
	}
	if _, err := emu.PutMany(testBucket, seedNames(100_000, func(i int) string { return fmt.Sprintf("big/f%06d", i) })); err != nil {
		t.Fatal(err)
	}
	wan := emulator.DefaultWAN()
	type walk struct {
		name, cmd, target string
		lines             int
		withWAN           bool
		goal              float64 // seconds, 0: none
	}
	walks := []walk{
		{"walk: cold find -type f over 200 x 1,000, WAN profile", "find tree -type f", "<= 4 s", 200_000, true, 4},
		{"walk: cold ls -f of 100,000, WAN profile", "ls -f big", "<= 3 s", 100_002, true, 3},
		{"walk: cold find -type f over 200 x 1,000, no WAN", "find tree -type f", "-", 200_000, false, 0},
		{"walk: cold ls -f of 100,000, no WAN", "ls -f big", "-", 100_002, false, 0},
	}
	for _, w := range walks {
		if w.withWAN {
			emu.SetWAN(&wan)
		} else {
			emu.SetWAN(nil)
		}
		var secs, rss []float64
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
		}
		s, r := median(secs), median(rss)
		tbl.add(benchRow{
			name: w.name, native: "-", bucketfs: fmt.Sprintf("%ss, RSS %s MiB", fmtSec(s), fmtNum(r)), ratio: "-",
			target: w.target, met: metStr(w.goal == 0 || s <= w.goal),
			note: fmt.Sprintf("medians of %d, each on a fresh mount; every name listed", cfg.repeat),
		})
	}
	emu.SetWAN(nil)
	return []string{"walk: the emulator's seeded store; the WAN profile is the bench's (30 ms before each response, 25 MiB/s a connection, 200 MiB/s in all)"}
}
