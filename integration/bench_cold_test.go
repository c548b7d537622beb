package integration

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// benchColdReads is the cold section: an object behind the WAN profile
// read once in full through a fresh mount, for a few prefetch settings
// and, with the default one, over plain HTTP and over TLS with each
// --client-protocol (issue 23: GCS is HTTPS and offers h2). The rows of
// one repeat are taken one after the other, the repeats interleaved, so
// that the TLS and plain rows see the same neighbours.
func benchColdReads(t *testing.T, emu *emulator.Server, cfg benchConfig, tbl *benchTable) []string {
	t.Helper()
	put(t, emu, benchCold, testutil.RandomBytes(int(cfg.size), 202))
	wan := emulator.DefaultWAN()
	emu.SetWAN(&wan)
	defer emu.SetWAN(nil)
	capMiB := float64(wan.Total) / (1 << 20)
	single := singleStreamGET(t, emu, benchCold, cfg.size)
	t.Logf("single stream GET (official client): %.1f MiB/s", single)

	settings := coldSettings()
	results := make([][]coldResult, len(settings))
	for rep := range cfg.repeat {
		for i, cs := range settings {
			c := coldRead(t, emu, cfg, cs)
			t.Logf("repeat %d cold %-40s %.0f MiB/s, first MiB after %v, %d media reads, %d TCP connections",
				rep+1, cs.label, c.mibps, c.first.Round(time.Millisecond), c.mediaReads, c.conns)
			results[i] = append(results[i], c)
		}
	}
	plain := 0.0 // the default setting over plain HTTP: settings[0]
	for i, cs := range settings {
		v := medianCold(results[i], func(c coldResult) float64 { return c.mibps })
		if i == 0 {
			plain = v
		}
		row := benchRow{
			name:     fmt.Sprintf("cold seq read %s (MiB/s), %s", sizeLabel(cfg.size), cs.label),
			native:   "cap " + fmtNum(capMiB),
			bucketfs: fmtNum(v),
			ratio:    fmtRatio(v / capMiB),
			target:   ">= 0.80 of cap",
			met:      metStr(v/capMiB >= 0.80),
			note: fmt.Sprintf("%.1fx single stream (%.1f); first MiB after %v; %.0f media reads over %.0f TCP connections",
				v/single, single, time.Duration(medianCold(results[i], func(c coldResult) float64 { return float64(c.first) })).Round(time.Millisecond),
				medianCold(results[i], func(c coldResult) float64 { return float64(c.mediaReads) }),
				medianCold(results[i], func(c coldResult) float64 { return float64(c.conns) })),
		}
		if cs.tls {
			row.note = fmt.Sprintf("%.2f of the plain HTTP row; ", v/plain) + row.note
			if cs.args == nil { // the default protocol: issue 23's goal
				row.target = ">= 0.80 of cap and of plain"
				row.met = metStr(v/capMiB >= 0.80 && v/plain >= 0.80)
			} else {
				row.target, row.met = "-", "-"
			}
		}
		tbl.add(row)
	}
	tbl.add(benchRow{
		name:     fmt.Sprintf("single stream GET %s (MiB/s)", sizeLabel(cfg.size)),
		native:   "cap " + fmtNum(float64(wan.PerConn)/(1<<20)) + "/conn",
		bucketfs: fmtNum(single),
		ratio:    fmtRatio(single / (float64(wan.PerConn) / (1 << 20))),
		target:   "-",
		met:      "-",
		note:     "official Go client, one GET of the whole object, plain HTTP",
	})
	return []string{fmt.Sprintf("WAN profile for cold and drain rows: %v before each response, %s/s per TCP connection (each way), %s/s in total; "+
		"TLS rows reach the emulator's TLS listener (self-signed certificate, ALPN h2 and http/1.1)",
		wan.Latency, sizeLabel(wan.PerConn), sizeLabel(wan.Total))}
}

func medianCold(rs []coldResult, f func(coldResult) float64) float64 {
	vs := make([]float64, len(rs))
	for i, r := range rs {
		vs[i] = f(r)
	}
	return median(vs)
}

// coldSetting is one row of the cold reads: prefetch flags and the way
// to the emulator (plain HTTP, or TLS with a client protocol).
type coldSetting struct {
	label string
	args  []string
	tls   bool
}

// transportCase is a way to the emulator that the cold-read and drain
// rows compare: plain HTTP (what tests use) and TLS, as GCS is reached,
// with each --client-protocol.
type transportCase struct {
	label string
	tls   bool
	args  []string
}

func transportCases() []transportCase {
	return []transportCase{
		{"plain HTTP", false, nil},
		{"TLS http1 (default)", true, nil},
		{"TLS http2", true, []string{"--client-protocol", "http2"}},
	}
}

func coldSettings() []coldSetting {
	var out []coldSetting
	for _, tc := range transportCases() {
		out = append(out, coldSetting{"8MiB x16 (default), " + tc.label, tc.args, tc.tls})
	}
	return append(out,
		coldSetting{"16MiB x16, plain HTTP", []string{"--prefetch-chunk-size", "16MiB"}, false},
		coldSetting{"4MiB x32, plain HTTP", []string{"--prefetch-chunk-size", "4MiB", "--prefetch-parallelism", "32"}, false},
	)
}

type coldResult struct {
	mibps      float64
	first      time.Duration // from open to the first MiB read
	mediaReads int64
	conns      int64 // TCP connections the emulator accepted during the read
}

// coldRead mounts with a fresh cache and reads benchCold once, start to
// end, with 1 MiB reads; the time includes the lookup and the open.
func coldRead(t *testing.T, emu *emulator.Server, cfg benchConfig, cs coldSetting) coldResult {
	t.Helper()
	cacheDir := t.TempDir()
	m := mount(t, emu, mountOpts{cacheDir: cacheDir, tls: cs.tls, args: append([]string{"--cache-max-size", "4GiB"}, cs.args...)})
	emu.ResetCounters()
	type res struct {
		n     int64
		first time.Duration
		err   error
	}
	ch := make(chan res, 1)
	start := time.Now()
	go func() {
		var r res
		f, err := os.Open(m.path(benchCold))
		if err != nil {
			r.err = err
			ch <- r
			return
		}
		defer f.Close()
		buf := make([]byte, 1<<20)
		for {
			k, err := f.Read(buf)
			if r.n == 0 && k > 0 {
				r.first = time.Since(start)
			}
			r.n += int64(k)
			if err == io.EOF {
				break
			}
			if err != nil {
				r.err = err
				break
			}
		}
		ch <- r
	}()
	var r res
	select {
	case r = <-ch:
	case <-time.After(10 * time.Minute):
		t.Fatalf("cold read of %s: not done within 10 minutes", benchCold)
	}
	d := time.Since(start)
	if r.err != nil {
		t.Fatalf("cold read of %s: %v", benchCold, r.err)
	}
	if r.n != cfg.size {
		t.Fatalf("cold read of %s: got %d bytes, want %d", benchCold, r.n, cfg.size)
	}
	out := coldResult{mibps: mibps(r.n, d), first: r.first, mediaReads: emu.MediaReads(testBucket, benchCold),
		conns: emu.Connections() + emu.TLSConnections()}
	m.unmount(t)
	os.RemoveAll(cacheDir) // a GiB per setting and repeat otherwise
	return out
}

// singleStreamGET downloads name with one GET through the official client
// and returns MiB/s.
func singleStreamGET(t *testing.T, emu *emulator.Server, name string, size int64) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	client, err := storage.NewClient(ctx, emu.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	start := time.Now()
	r, err := client.Bucket(testBucket).Object(name).NewReader(ctx)
	if err != nil {
		t.Fatalf("single stream GET: %v", err)
	}
	defer r.Close()
	var n int64
	buf := make([]byte, 1<<20)
	for {
		k, err := r.Read(buf)
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("single stream GET after %d bytes: %v", n, err)
		}
	}
	d := time.Since(start)
	if n != size {
		t.Fatalf("single stream GET: got %d bytes, want %d", n, size)
	}
	return mibps(n, d)
}
