package integration

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// The footer section (issue 27): what a reader of a big object's last
// MiB (a Parquet, ORC or zip footer, an MP4 index) costs. Behind the WAN
// profile, a fresh mount; one process opens a cold object of
// BENCH_SIZE_MIB, reads its last MiB and closes it. The row gives the
// time of that read and the object bytes the mount fetched in the 15 s
// after the open (bucketfs_bucket_bytes_total{method="read"}): what the
// egress of that one read was, and by reason
// (bucketfs_fetched_bytes_total). Issue 27's goals: <= 0.5 s and <= 64
// MiB. Two more rows on a fresh mount each: 8 processes each reading one
// MiB at a random place of the cold object at once (each should have its
// bytes within one chunk's time on the link: 8 MiB at 25 MiB/s and 30
// ms, about 0.35 s), and a read in order of all of it, then a second
// read, which should not reach the daemon (a complete copy, read by
// passthrough: bucketfs_cache_read_bytes_total stays put).

const (
	benchFooterObj  = "footer/big.parquet"
	footerWindow    = 15 * time.Second
	footerReadBytes = 1 << 20
)

func benchFooter(t *testing.T, emu *emulator.Server, cfg benchConfig, tbl *benchTable) []string {
	t.Helper()
	putBig(t, emu, benchFooterObj, cfg.size)
	wan := emulator.DefaultWAN()
	emu.SetWAN(&wan)
	defer emu.SetWAN(nil)
	var secs, fetched []float64
	for rep := range cfg.repeat {
		m := mount(t, emu, mountOpts{args: footerMountArgs(cfg.size)})
		url := m.metricsURL(t)
		start := time.Now()
		f, err := os.Open(m.path(benchFooterObj))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, footerReadBytes)
		n, err := f.ReadAt(buf, cfg.size-footerReadBytes)
		d := time.Since(start)
		f.Close()
		if err != nil || n != footerReadBytes {
			t.Fatalf("footer read: %d bytes, %v", n, err)
		}
		time.Sleep(footerWindow - time.Since(start)) // the window measured, not a synchronization
		sc := scrape(t, url)
		got := need(t, sc, `bucketfs_bucket_bytes_total{method="read"}`)
		m.unmount(t)
		t.Logf("repeat %d footer read of %s: %v, %.0f MiB fetched in %v (%s)", rep+1, sizeLabel(cfg.size), d.Round(time.Millisecond), got/(1<<20), footerWindow, fetchedByReason(sc))
		secs, fetched = append(secs, d.Seconds()), append(fetched, got/(1<<20))
	}
	s, mib := median(secs), median(fetched)
	tbl.add(benchRow{
		name:     fmt.Sprintf("footer read, last MiB of a cold %s object (s)", sizeLabel(cfg.size)),
		native:   "-",
		bucketfs: fmtSec(s),
		ratio:    "-",
		target:   "<= 0.5 s, <= 64 MiB fetched",
		met:      metStr(s <= 0.5 && mib <= 64),
		note:     fmt.Sprintf("%.0f MiB fetched in the %v after the open (open, pread, close; WAN profile)", mib, footerWindow),
	})
	benchFooterBehindWhole(t, emu, cfg, tbl)
	benchRandomReaders(t, emu, cfg, tbl)
	benchReadThenPassthrough(t, emu, cfg, tbl)
	return []string{"footer: one process reads the last MiB of a cold object and closes it; bytes from the mount's metrics"}
}

// benchFooterBehindWhole: the footer read while another object of the
// same size is being fetched whole (read in order for 16 MiB, which
// makes it a whole fetch, and closed: the fetch goes on). The reader's
// chunk should go first (transfer.Priority), not share the link with
// the 16 range reads of the other.
func benchFooterBehindWhole(t *testing.T, emu *emulator.Server, cfg benchConfig, tbl *benchTable) {
	const other = "footer/other.bin"
	put(t, emu, other, testutil.RandomBytes(int(cfg.size), 304))
	var secs []float64
	for rep := range cfg.repeat {
		m := mount(t, emu, mountOpts{args: footerMountArgs(cfg.size)})
		f, err := os.Open(m.path(other))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(io.Discard, f, 16<<20); err != nil {
			t.Fatal(err)
		}
		f.Close()
		start := time.Now()
		g, err := os.Open(m.path(benchFooterObj))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, footerReadBytes)
		_, err = g.ReadAt(buf, cfg.size-footerReadBytes)
		d := time.Since(start)
		g.Close()
		if err != nil {
			t.Fatalf("footer read behind a whole fetch: %v", err)
		}
		sc := scrape(t, m.metricsURL(t))
		m.unmount(t)
		t.Logf("repeat %d: footer read of %s while another is fetched whole: %v (%s so far)", rep+1, sizeLabel(cfg.size), d.Round(time.Millisecond), fetchedByReason(sc))
		secs = append(secs, d.Seconds())
	}
	v := median(secs)
	tbl.add(benchRow{
		name:     fmt.Sprintf("footer read while a %s object is fetched whole (s)", sizeLabel(cfg.size)),
		native:   "-",
		bucketfs: fmtSec(v),
		ratio:    "-",
		target:   "<= 0.5 s",
		met:      metStr(v <= 0.5),
		note:     "the other object: 16 MiB read in order, closed, its whole fetch going on (WAN profile)",
	})
}

// footerMountArgs are the section's mount flags for an object of size
// bytes: a cache that holds it twice (4 GiB at least), so that the
// object is cached chunk by chunk as any that fits (one bigger than the
// cache is read through it, uncached), and metrics.
func footerMountArgs(size int64) []string {
	return []string{"--cache-max-size", strconv.FormatInt(max(4<<30, 2*size), 10), "--metrics-addr", "127.0.0.1:0"}
}

// putBig stores a cold object of size random bytes under name in the
// emulator's seeded store, which keeps the one slice it is given: the
// fake's put holds copies of it, and an 8 GiB object did not fit in
// this machine's memory that way.
func putBig(t *testing.T, emu *emulator.Server, name string, size int64) {
	t.Helper()
	data := testutil.RandomBytes(int(size), 303)
	if _, err := emu.PutMany(testBucket, slices.Values([]emulator.Seed{{Name: name, Data: data}})); err != nil {
		t.Fatal(err)
	}
}

// fetchedByReason formats bucketfs_fetched_bytes_total of a scrape.
func fetchedByReason(sc map[string]float64) string {
	var b strings.Builder
	for _, r := range []string{"read", "readahead", "whole", "warm"} {
		fmt.Fprintf(&b, "%s %.0f MiB ", r, sc[`bucketfs_fetched_bytes_total{reason="`+r+`"}`]/(1<<20))
	}
	return strings.TrimSpace(b.String())
}

// benchRandomReaders: 8 processes (goroutines, each with its own open)
// read one MiB each at random MiB offsets of the cold object at once;
// the row is the slowest one's time, median over the repeats. With
// BENCH_RANDOM_MIB (cfg.randomSize) the object is one of that size
// (issue 27 asks for 8 GiB; BENCH_SIZE_MIB stops at 3 GiB).
func benchRandomReaders(t *testing.T, emu *emulator.Server, cfg benchConfig, tbl *benchTable) {
	if cfg.randomSize == 0 || cfg.randomSize == cfg.size {
		benchRandomReadersOf(t, emu, cfg, tbl, benchFooterObj)
		return
	}
	const name = "footer/random.bin"
	putBig(t, emu, name, cfg.randomSize)
	defer emu.Delete(testBucket, name) // its memory, for the sections after
	sized := cfg
	sized.size = cfg.randomSize
	benchRandomReadersOf(t, emu, sized, tbl, name)
}

// benchRandomReadersOf is benchRandomReaders of object name, of cfg.size
// bytes.
func benchRandomReadersOf(t *testing.T, emu *emulator.Server, cfg benchConfig, tbl *benchTable, name string) {
	const readers = 8
	var slowest []float64
	for rep := range cfg.repeat {
		m := mount(t, emu, mountOpts{args: footerMountArgs(cfg.size)})
		rng := rand.New(rand.NewPCG(uint64(rep), 27))
		times := make([]time.Duration, readers)
		errs := make(chan error, readers)
		for i := range readers {
			off := rng.Int64N(cfg.size>>20) << 20
			go func() {
				start := time.Now()
				f, err := os.Open(m.path(name))
				if err != nil {
					errs <- err
					return
				}
				defer f.Close()
				buf := make([]byte, 1<<20)
				_, err = f.ReadAt(buf, off)
				times[i] = time.Since(start)
				errs <- err
			}()
		}
		for range readers {
			if err := <-errs; err != nil {
				t.Fatalf("random reader: %v", err)
			}
		}
		sc := scrape(t, m.metricsURL(t))
		m.unmount(t)
		slices.Sort(times)
		worst := times[len(times)-1]
		t.Logf("repeat %d: 8 random readers of %s: %v (%s)", rep+1, sizeLabel(cfg.size), times, fetchedByReason(sc))
		slowest = append(slowest, worst.Seconds())
	}
	s := median(slowest)
	tbl.add(benchRow{
		name:     fmt.Sprintf("8 random readers of a cold %s object, slowest (s)", sizeLabel(cfg.size)),
		native:   "-",
		bucketfs: fmtSec(s),
		ratio:    "-",
		target:   "<= 0.5 s (a chunk's time)",
		met:      metStr(s <= 0.5),
		note:     "each opens the object and reads 1 MiB at a random MiB; all at once (WAN profile)",
	})
}

// benchReadThenPassthrough reads the cold object in order, then again:
// the second read must not reach the daemon.
func benchReadThenPassthrough(t *testing.T, emu *emulator.Server, cfg benchConfig, tbl *benchTable) {
	capMiB := float64(emulator.DefaultWAN().Total) / (1 << 20)
	var speeds []float64
	passthrough := true
	for rep := range cfg.repeat {
		// The rows before left GiBs of cache files to write back: this
		// read, which writes its GiB to the cache disk too, would share
		// the disk with them (this machine's disk writes about 255 MiB/s).
		syscall.Sync()
		m := mount(t, emu, mountOpts{args: footerMountArgs(cfg.size)})
		url := m.metricsURL(t)
		start := time.Now()
		if n := readInOrder(t, m.path(benchFooterObj)); n != cfg.size {
			t.Fatalf("read in order: %d bytes, want %d", n, cfg.size)
		}
		speed := mibps(cfg.size, time.Since(start))
		before := scrape(t, url)
		readInOrder(t, m.path(benchFooterObj))
		after := scrape(t, url)
		m.unmount(t)
		through := after["bucketfs_cache_read_bytes_total"] - before["bucketfs_cache_read_bytes_total"]
		t.Logf("repeat %d: read in order %.0f MiB/s (%s); the second read sent %.0f MiB through the daemon", rep+1, speed, fetchedByReason(before), through/(1<<20))
		passthrough = passthrough && through == 0
		speeds = append(speeds, speed)
	}
	v := median(speeds)
	tbl.add(benchRow{
		name:     fmt.Sprintf("read in order of a cold %s object (MiB/s), then again", sizeLabel(cfg.size)),
		native:   "cap " + fmtNum(capMiB),
		bucketfs: fmtNum(v),
		ratio:    fmtRatio(v / capMiB),
		target:   ">= 0.80 of cap, second read by passthrough",
		met:      metStr(v/capMiB >= 0.80 && passthrough),
		note:     fmt.Sprintf("second read served by passthrough in every repeat: %v", passthrough),
	})
}

// readInOrder reads path to its end in MiB reads and returns the bytes read.
func readInOrder(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, make([]byte, 1<<20))
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return n
}
