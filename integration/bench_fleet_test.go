package integration

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fleet section (issue 34): how long a change made in the bucket
// takes to show on a mount, with the bucket's change notifications and
// without them (the default --metadata-ttl, 60 s). The emulator publishes
// the changes (no WAN profile: the lag is the mount's, not the link's).
// The mount first stats each of BENCH_FLEET_CHANGES files (200), as a
// program that uses them would; then each is overwritten in the bucket,
// one every BENCH_FLEET_EVERY (100 ms), with content of another size; a
// change shows when a stat on the mount gives the new size, polled every
// 20 ms (the figures' granularity).

func benchFleet(t *testing.T, cfg benchConfig, tbl *benchTable) []string {
	n := 200
	if v := os.Getenv("BENCH_FLEET_CHANGES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("BENCH_FLEET_CHANGES=%q: want a count", v)
		}
	}
	every := 100 * time.Millisecond
	if v := os.Getenv("BENCH_FLEET_EVERY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("BENCH_FLEET_EVERY=%q: %v", v, err)
		}
		every = d
	}
	for _, notify := range []bool{true, false} {
		lags := fleetLags(t, n, every, notify)
		slices.Sort(lags)
		p50, p99 := lags[len(lags)/2], lags[min(len(lags)-1, len(lags)*99/100)]
		name, target, met := "fleet: a change in the bucket seen on a mount, notifications", "p99 <= 1.5 s", p99 <= 1.5
		if !notify {
			name, target, met = "fleet: the same, --metadata-ttl 60s alone", "-", true
		}
		tbl.add(benchRow{
			name:     name,
			native:   "-",
			bucketfs: fmt.Sprintf("p50 %ss, p99 %ss", fmtSec(p50), fmtSec(p99)),
			ratio:    "-",
			target:   target,
			met:      metStr(met),
			note:     fmt.Sprintf("%d overwrites, one every %v, each polled with stat every 20 ms; max %ss", n, every, fmtSec(lags[len(lags)-1])),
		})
	}
	return []string{"fleet: the emulator publishes its changes to an in-process Pub/Sub fake; no WAN profile"}
}

// fleetLags overwrites n files in the bucket, one every every, and
// returns how long each took to show on a mount (with the notifications
// on, or not), in seconds.
func fleetLags(t *testing.T, n int, every time.Duration, notify bool) []float64 {
	emu := startFleetEmulator(t)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("lag/f%04d", i)
		put(t, emu, names[i], []byte("x"))
	}
	o := mountOpts{}
	if notify {
		o = mountOpts{env: fleetEnv(emu), args: []string{"--notify-topic", fleetTopic}}
	}
	m := mount(t, emu, o)
	defer m.unmount(t)
	for _, name := range names {
		if _, err := os.Stat(m.path(name)); err != nil {
			t.Fatal(err)
		}
	}
	type pending struct {
		name string
		at   time.Time
	}
	var waiting []pending
	lags := make([]float64, 0, n)
	next := time.Now()
	deadline := time.Now().Add(time.Duration(n)*every + 3*time.Minute)
	for i := 0; i < n || len(waiting) > 0; {
		now := time.Now()
		if now.After(deadline) {
			t.Fatalf("fleet lag: %d changes not seen on the mount by the deadline (notifications %v)", len(waiting), notify)
		}
		if i < n && !now.Before(next) {
			put(t, emu, names[i], []byte(strings.Repeat("y", 2+i%7)))
			waiting = append(waiting, pending{names[i], time.Now()})
			i++
			next = next.Add(every)
		}
		kept := waiting[:0]
		for _, p := range waiting {
			st, err := os.Stat(m.path(p.name))
			if err == nil && st.Size() != 1 {
				lags = append(lags, time.Since(p.at).Seconds())
				continue
			}
			kept = append(kept, p)
		}
		waiting = kept
		time.Sleep(20 * time.Millisecond) // the poll's period: what is measured is another process's change
	}
	return lags
}
