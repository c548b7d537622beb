package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"github.com/bucketfs/bucketfs/internal/testutil/faultproxy"
	"golang.org/x/sys/unix"
)

// The offline section: latency of 4 KiB reads of a cached file while the
// bucket is black-holed (the fault proxy accepts connections and never
// answers), against the same reads while it is up, in one run. The two
// states alternate (BENCH_REPEAT rounds of each), so that noise spreads
// over both. Each black-holed round starts with a read of an object that
// is not cached, left hanging in the background until the mount's breaker
// gives it EIO: cached reads must not wait behind it.
//
// Two kinds of read, with O_DIRECT (past the page cache: with passthrough
// the kernel reads the cache file from the disk, without it every read is
// a FUSE request to the daemon), on two mounts (passthrough, the default,
// and --passthrough=false):
//   - pread: a 4 KiB pread at a random offset of a file held open;
//   - open+pread+close: the same, opening the file each time (a lookup
//     and an open answered by the daemon, within the metadata TTL).

const (
	benchOfflineFile  = "offline/cached.bin"
	benchOfflineSize  = 64 << 20
	benchOfflineReads = 2000 // per round, per kind
)

func benchOffline(t *testing.T, emu *emulator.Server, cfg benchConfig, tbl *benchTable) []string {
	t.Helper()
	data := testutil.RandomBytes(benchOfflineSize, 303)
	put(t, emu, benchOfflineFile, data)
	want := sum(data)
	flavours := []struct {
		label string
		args  []string
	}{
		{"passthrough", nil},
		{"no passthrough", []string{"--passthrough=false"}},
	}
	type sample struct{ up, away []time.Duration }
	results := map[string]*sample{}
	var keys []string
	for _, fl := range flavours {
		p := faultproxy.Start(t, strings.TrimPrefix(emu.URL(), "http://"))
		args := append([]string{"--endpoint", p.URL(), "--metadata-ttl", "1h"}, fl.args...)
		m := mount(t, emu, mountOpts{args: args})
		if got, n := hashFile(t, m.path(benchOfflineFile), 5*time.Minute); got != want || n != benchOfflineSize {
			t.Fatalf("warming %s: %d bytes, wrong sum", fl.label, n)
		}
		for _, uncached := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
			put(t, emu, "offline/uncached-"+uncached, []byte(uncached))
		}
		if _, err := os.ReadDir(m.path("offline")); err != nil {
			t.Fatal(err)
		}
		for rep := range cfg.repeat {
			for _, away := range []bool{false, true} {
				hang := make(chan error, 1)
				mode := faultproxy.Pass()
				if away {
					mode = faultproxy.BlackHole()
				}
				if err := p.SetMode(mode); err != nil {
					t.Fatal(err)
				}
				if away {
					name := m.path(fmt.Sprintf("offline/uncached-%c", 'a'+rep%8))
					go func() { _, err := os.ReadFile(name); hang <- err }()
				}
				for _, kind := range []string{"pread", "open+pread+close"} {
					key := kind + ", " + fl.label
					if results[key] == nil {
						results[key] = &sample{}
						keys = append(keys, key)
					}
					d := timeReads(t, m.path(benchOfflineFile), kind == "pread", uint64(rep))
					if away {
						results[key].away = append(results[key].away, d...)
					} else {
						results[key].up = append(results[key].up, d...)
					}
				}
				if away {
					select {
					case err := <-hang:
						t.Logf("round %d, %s: the uncached read ended with %v", rep+1, fl.label, err)
					case <-time.After(2 * time.Minute):
						t.Fatalf("an uncached read did not end within 2 minutes while black-holed")
					}
				}
			}
		}
		if err := p.SetMode(faultproxy.Pass()); err != nil {
			t.Fatal(err)
		}
		m.unmount(t)
	}
	for _, key := range keys {
		s := results[key]
		upP50, upP99 := pct(s.up, 50), pct(s.up, 99)
		p50, p99 := pct(s.away, 50), pct(s.away, 99)
		tbl.add(benchRow{
			name:     "cached 4k " + key + ", black-holed: p50 / p99 (us)",
			native:   fmt.Sprintf("up %s / %s", us(upP50), us(upP99)),
			bucketfs: fmt.Sprintf("%s / %s", us(p50), us(p99)),
			ratio:    fmtRatio(float64(p99) / float64(upP99)),
			target:   "p99 < 10 ms",
			met:      metStr(p99 < 10*time.Millisecond),
			note:     fmt.Sprintf("%d reads each state; ratio: p99 black-holed / p99 up", len(s.away)),
		})
	}
	return []string{"offline: the 'native' column is the same reads with the bucket up, in the same run"}
}

// timeReads times benchOfflineReads 4 KiB reads of path at random offsets.
func timeReads(t *testing.T, path string, keepOpen bool, seed uint64) []time.Duration {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE) // aligned, for O_DIRECT
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	open := func() (*os.File, error) { return os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0) }
	var f *os.File
	if keepOpen {
		var err error
		if f, err = open(); err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	out := make([]time.Duration, 0, benchOfflineReads)
	for range benchOfflineReads {
		off := rng.Int64N(benchOfflineSize/4096) * 4096
		start := time.Now()
		g := f
		if !keepOpen {
			var err error
			if g, err = open(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := g.ReadAt(buf, off); err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if !keepOpen {
			g.Close()
		}
		out = append(out, time.Since(start))
	}
	return out
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Microsecond)) }
