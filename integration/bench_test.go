package integration

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// The benchmark harness behind 'make bench'. It reports; it does not gate:
// a missed target is printed as such, while a failing fio job or wrong data
// fails the test.
//
// Environment:
//
//	BUCKETFS_BENCH=1   run at all (otherwise the test skips, so that
//	                   'make test' does not pay for it)
//	BENCH_RUNTIME      length of each time-based fio job (default 15s;
//	                   a Go duration or a number of seconds)
//	BENCH_REPEAT       how many times each measurement is taken, interleaved
//	                   across the cases; the table shows medians (default 3:
//	                   on a shared 2-core machine one run's cached/native
//	                   ratio swings by +-20%)
//	BENCH_SIZE_MIB     size of the test files in MiB (default 1024)
//	BENCH_SMALL_FILES  files per run of the small-files case (default 10000)
//	BENCH_RANDOM_MIB   size in MiB of the object of the footer section's
//	                   random readers (default BENCH_SIZE_MIB; up to 16384:
//	                   the emulator holds it in memory)
//	BENCH_DRAIN_PARALLELISM
//	                   --upload-parallelism of the small-files runs, one
//	                   run each, comma-separated (default 8; "8,64" adds a
//	                   run with 64)
//	BENCH_DRAIN_ARGS   more mount flags for the drain rows (say
//	                   "--offline-after 30s")
//	BENCH_ONLY         run only these sections, comma-separated: read
//	                   (= cached-read, cold), write (= fio-write,
//	                   small-files, saves, write-out, drain), or one of
//	                   those (cached-write is the old name of fio-write;
//	                   small-files includes saves and write-out),
//	                   xml-drain, warm,
//	                   offline, small-read, names, resumable, scale,
//	                   footer, fleet, walk, medium (default: all)
//	BENCH_FLEET_CHANGES, BENCH_FLEET_EVERY
//	                   the fleet section's changes (default 200) and
//	                   their pace (default 100ms)
//	BENCH_SCALE_10M    1: the scale section also walks 10,000,000 names
//	BENCH_SCALE_ARGS   more mount flags for the scale section
//	BENCH_OUT          also write the table and the machine facts here
//
// Cases, all measured in the same run so that their ratios are meaningful
// on a shared, noisy machine:
//
//   - native: a file in a t.TempDir(), which is on the same filesystem as
//     the cache directories (also t.TempDir(); checked with statfs and
//     printed);
//   - cached: the same bytes as an object, read once through a mount to
//     warm the cache, then fio on the mount's file, with passthrough (the
//     default) and with --passthrough=false;
//   - cold: a different object behind emulator.DefaultWAN(), read once in
//     full through a fresh mount (fresh cache) for a few prefetch settings,
//     and with the default one over plain HTTP and over the emulator's TLS
//     listener with --client-protocol http1 and http2, against the WAN's
//     total cap and against one GET of the whole object by the official
//     client (one stream); see bench_cold_test.go.
//
// The fio jobs use --direct=1. On the native file that means reads go to
// the disk, bypassing the page cache. On the mount it depends on the
// handle: with passthrough the kernel opens the backing cache file with the
// caller's flags, O_DIRECT included, so reads go to the disk exactly as on
// the native file and the daemon never sees them; without passthrough
// O_DIRECT only bypasses the FUSE inode's page cache: every read becomes a
// FUSE_READ request to the daemon (in parallel, as bucketfs asks for
// CAP_ASYNC_DIO), which serves it with an ordinary buffered pread of its
// cache file, usually from the host's page cache. That row therefore
// measures the FUSE round trip, not the disk.
//
// The write cases (fio writes, small files, the drain of a large dirty
// file) are described in bench_write_test.go and bench_fiowrite_test.go, the xml-drain case (the XML
// multipart upload path against versitygw) in bench_xml_test.go.
func TestBench(t *testing.T) {
	if os.Getenv("BUCKETFS_BENCH") != "1" {
		t.Skip("benchmarks run with BUCKETFS_BENCH=1 (make bench)")
	}
	fioPath, err := exec.LookPath("fio")
	if err != nil {
		t.Skip("benchmarks need fio (apt-get install fio): " + err.Error())
	}
	cfg := benchConfigFromEnv(t)
	t.Logf("fio %s, runtime %v per job, %d repeat(s), files of %s",
		fioPath, cfg.runtime, cfg.repeat, sizeLabel(cfg.size))

	emu := startEmulator(t, nil)
	tbl := &benchTable{}
	var notes []string
	if cfg.runs("cached-read") {
		notes = append(notes, benchReads(t, emu, fioPath, cfg, tbl)...)
	}
	if cfg.runs("cold") {
		notes = append(notes, benchColdReads(t, emu, cfg, tbl)...) // bench_cold_test.go
	}
	if cfg.runs("medium") {
		notes = append(notes, benchMedium(t, emu, fioPath, cfg, tbl)...) // bench_medium_test.go
	}
	if cfg.runs("write") {
		notes = append(notes, benchWrites(t, emu, fioPath, cfg, tbl)...)
	}
	if cfg.runs("xml-drain") {
		notes = append(notes, benchXMLDrainSection(t, cfg, tbl)...)
	}
	if cfg.runs("warm") {
		notes = append(notes, benchWarm(t, cfg, tbl)...)
	}
	if cfg.runs("offline") {
		notes = append(notes, benchOffline(t, emu, cfg, tbl)...) // bench_offline_test.go
	}
	if cfg.runs("small-read") {
		notes = append(notes, benchSmallReads(t, cfg, tbl)...)
	}
	if cfg.runs("names") {
		notes = append(notes, benchNames(t, cfg, tbl)...)
	}
	if cfg.runs("footer") {
		notes = append(notes, benchFooter(t, emu, cfg, tbl)...) // bench_footer_test.go
	}
	if cfg.runs("scale") {
		notes = append(notes, benchScale(t, cfg, tbl)...) // bench_scale_test.go
	}
	if cfg.runs("walk") {
		notes = append(notes, benchWalk(t, cfg, tbl)...) // bench_walk_test.go
	}
	if cfg.runs("fleet") {
		notes = append(notes, benchFleet(t, cfg, tbl)...) // bench_fleet_test.go
	}
	if cfg.runs("resumable") {
		notes = append(notes, benchResumable(t, cfg, tbl)...) // bench_resumable_test.go
	}

	report := tbl.String()
	seen := map[string]bool{}
	for _, n := range notes {
		if !seen[n] {
			seen[n] = true
			report += "note: " + n + "\n"
		}
	}
	for _, line := range strings.Split(strings.TrimRight(report, "\n"), "\n") {
		t.Log(line)
	}
	fmt.Print("\n" + report)
	if out := os.Getenv("BENCH_OUT"); out != "" {
		content := report + "\n" + machineFacts(fioPath, cfg)
		if err := os.WriteFile(out, []byte(content), 0o644); err != nil {
			t.Errorf("writing BENCH_OUT: %v", err)
		} else {
			t.Logf("wrote %s", out)
		}
	}
}

// benchReads measures cached reads (fio on a file read once through a
// mount, against the native file), adds its rows to tbl and returns its
// notes.
func benchReads(t *testing.T, emu *emulator.Server, fioPath string, cfg benchConfig, tbl *benchTable) []string {
	t.Helper()
	var notes []string

	// Content: the cached object and its native twin, then the cold
	// object. Only the emulator keeps the bytes once they are written.
	nativeDir := t.TempDir()
	nativeFile := filepath.Join(nativeDir, "native.bin")
	wantSum := func() string {
		data := testutil.RandomBytes(int(cfg.size), 101)
		put(t, emu, benchCached, data)
		writeSynced(t, nativeFile, data)
		return sum(data)
	}()
	runtime.GC()

	// Warm one cache per mount flavour, then take the mount down cleanly
	// and mount again on the same cache. After the last chunk arrives,
	// bucketfs syncs the cache file and records it in its index in the
	// background; a clean unmount waits for that, so no fsync of a GiB
	// competes with the first fio jobs for the disk, and the fio jobs see
	// what a user sees after a restart: a complete copy known from the
	// index, opened with passthrough.
	cachedArgs := []string{"--cache-max-size", "4GiB"}
	flavours := []struct {
		label string
		args  []string
	}{
		{"passthrough", cachedArgs},
		{"no passthrough", append(slices.Clip(cachedArgs), "--passthrough=false")},
	}
	cacheDirs := make([]string, len(flavours))
	for i, fl := range flavours {
		cacheDirs[i] = t.TempDir()
		warmCache(t, emu, cacheDirs[i], fl.args, fl.label, benchCached, cfg.size, wantSum)
	}
	notes = append(notes, sameFilesystem(t, nativeDir, cacheDirs[0]))

	mounts := make([]*mountProc, len(flavours))
	for i, fl := range flavours {
		mounts[i] = mount(t, emu, mountOpts{cacheDir: cacheDirs[i], args: fl.args})
	}
	targets := []fioTarget{{label: "native", path: nativeFile}}
	for i, fl := range flavours {
		targets = append(targets, fioTarget{label: fl.label, path: mounts[i].path(benchCached), pid: mounts[i].cmd.Process.Pid})
	}

	// Interleave: for each repeat and job, every target in turn, so that
	// noise from neighbours spreads over all of them.
	jobs := benchJobs()
	results := map[[2]int][]fioResult{} // [job, target] -> one per repeat
	for rep := range cfg.repeat {
		for ji, job := range jobs {
			for ti, tg := range targets {
				r := runFioJob(t, fioPath, job, tg, cfg)
				t.Logf("repeat %d %-9s %-15s %s", rep+1, job.key, tg.label, r.summary(job))
				results[[2]int{ji, ti}] = append(results[[2]int{ji, ti}], r)
			}
		}
	}

	// The data must still read back right through the passthrough mount.
	if got, n := hashFile(t, targets[1].path, 10*time.Minute); n != cfg.size || got != wantSum {
		t.Fatalf("read after fio through the passthrough mount: %d bytes, sha256 %s; want %d, %s", n, got, cfg.size, wantSum)
	}
	for _, m := range mounts {
		m.unmount(t)
	}

	// Values are medians over the repeats; a ratio is the median of the
	// per-repeat ratios, each between runs taken next to each other.
	for ji, job := range jobs {
		natives := results[[2]int{ji, 0}]
		native := medianOf(natives, job.value)
		var byFlavour []float64
		for ti := 1; ti < len(targets); ti++ {
			rs := results[[2]int{ji, ti}]
			v := medianOf(rs, job.value)
			byFlavour = append(byFlavour, v)
			ratios := make([]float64, len(rs))
			for i := range rs {
				ratios[i] = job.value(rs[i]) / job.value(natives[i])
			}
			ratio := median(ratios)
			row := benchRow{
				name:     fmt.Sprintf("cached %s (%s), %s", job.label, job.unit, targets[ti].label),
				native:   fmtNum(native),
				bucketfs: fmtNum(v),
				ratio:    fmtRatio(ratio),
			}
			daemon := medianOf(rs, func(r fioResult) float64 { return float64(r.daemonRead) })
			moved := medianOf(rs, func(r fioResult) float64 { return float64(r.job.Read.IOBytes) })
			row.note = fmt.Sprintf("daemon read %s (incl. ramp) for %s read by fio", sizeLabel(int64(daemon)), sizeLabel(int64(moved)))
			if targets[ti].label == "passthrough" {
				row.target, row.met = fmt.Sprintf(">= %.2f", job.target), metStr(ratio >= job.target)
				if daemon > 0.1*moved {
					row.note += "; PASSTHROUGH NOT ENGAGED"
					t.Logf("warning: the daemon read %s during the passthrough %s job: the kernel did not read the cache file directly", sizeLabel(int64(daemon)), job.key)
				}
			} else {
				row.target, row.met = "-", "-"
			}
			tbl.add(row)
		}
		if len(byFlavour) == 2 && byFlavour[1] > 0 {
			notes = append(notes, fmt.Sprintf("passthrough / no passthrough on cached %s: %.2fx (%s vs %s %s)",
				job.label, byFlavour[0]/byFlavour[1], fmtNum(byFlavour[0]), fmtNum(byFlavour[1]), job.unit))
		}
	}

	if cfg.repeat > 1 {
		notes = append(notes, fmt.Sprintf("values are medians of %d interleaved repeats; cached ratios are medians of the per-repeat ratios", cfg.repeat))
	}
	notes = append(notes, "without passthrough the daemon serves O_DIRECT reads with buffered preads of its cache file, "+
		"from the page cache once read: those rows measure the FUSE path and memory, not the disk")

	return notes
}

const (
	benchCached = "bench-cached.bin"
	benchCold   = "bench-cold.bin"
)

type benchConfig struct {
	runtime    time.Duration // each time-based fio job
	ramp       time.Duration // fio ramp before measuring, on top of runtime
	repeat     int
	size       int64
	smallFiles int             // files per run of the small-files case
	randomSize int64           // object of the footer section's random readers; 0: size
	drainPars  []int           // --upload-parallelism of each small-files run
	only       map[string]bool // BENCH_ONLY; empty: every section
}

// benchSections are the names BENCH_ONLY takes; "read" stands for the
// two read sections, "write" for the five write sections, and
// "cached-write" is the old name of "fio-write".
var benchSections = []string{"read", "cached-read", "cold", "write", "fio-write", "cached-write", "small-files", "saves", "write-out", "drain", "xml-drain", "warm", "offline", "small-read", "names", "resumable", "scale", "footer", "fleet", "walk", "medium"}

// runs says whether section (one of benchSections) is to run.
func (c benchConfig) runs(section string) bool {
	if len(c.only) == 0 || c.only[section] {
		return true
	}
	switch section {
	case "read":
		return c.only["cached-read"] || c.only["cold"]
	case "cached-read", "cold":
		return c.only["read"]
	case "write":
		return c.only["fio-write"] || c.only["cached-write"] || c.only["small-files"] || c.only["drain"] || c.only["saves"] || c.only["write-out"]
	case "fio-write":
		return c.only["write"] || c.only["cached-write"]
	case "small-files", "drain":
		return c.only["write"]
	case "saves", "write-out":
		return c.only["write"] || c.only["small-files"]
	}
	return false
}

func benchConfigFromEnv(t *testing.T) benchConfig {
	t.Helper()
	c := benchConfig{runtime: 15 * time.Second, ramp: 2 * time.Second, repeat: 3, size: 1 << 30, smallFiles: 10000, drainPars: []int{8}}
	if v := os.Getenv("BENCH_RUNTIME"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			n, nerr := strconv.Atoi(v)
			if nerr != nil {
				t.Fatalf("BENCH_RUNTIME=%q: want a duration (15s) or a number of seconds", v)
			}
			d = time.Duration(n) * time.Second
		}
		if d < time.Second {
			t.Fatalf("BENCH_RUNTIME=%q: at least 1s", v)
		}
		c.runtime = d.Round(time.Second)
	}
	if v := os.Getenv("BENCH_REPEAT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("BENCH_REPEAT=%q: want a positive integer", v)
		}
		c.repeat = n
	}
	if v := os.Getenv("BENCH_SIZE_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 16 || n > 3072 {
			t.Fatalf("BENCH_SIZE_MIB=%q: want 16 to 3072 (the cached mounts use --cache-max-size 4GiB)", v)
		}
		c.size = int64(n) << 20
	}
	if v := os.Getenv("BENCH_RANDOM_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 16 || n > 16384 {
			t.Fatalf("BENCH_RANDOM_MIB=%q: want 16 to 16384", v)
		}
		c.randomSize = int64(n) << 20
	}
	if v := os.Getenv("BENCH_SMALL_FILES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 || n > 100000 {
			t.Fatalf("BENCH_SMALL_FILES=%q: want 100 to 100000", v)
		}
		c.smallFiles = n
	}
	if v := os.Getenv("BENCH_DRAIN_PARALLELISM"); v != "" {
		c.drainPars = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 1024 {
				t.Fatalf("BENCH_DRAIN_PARALLELISM=%q: want a comma-separated list of 1 to 1024", v)
			}
			c.drainPars = append(c.drainPars, n)
		}
	}
	if v := os.Getenv("BENCH_ONLY"); v != "" {
		c.only = map[string]bool{}
		for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '|' || r == ' ' }) {
			if !slices.Contains(benchSections, f) {
				t.Fatalf("BENCH_ONLY=%q: %q is not one of %s", v, f, strings.Join(benchSections, ", "))
			}
			c.only[f] = true
		}
	}
	return c
}

// fioJobSpec is one of the time-based fio jobs run on every target.
type fioJobSpec struct {
	key   string // fio's job name
	label string // for the table
	unit  string
	args  []string
	value func(fioResult) float64
	// target is the least bucketfs/native ratio the cached passthrough
	// row should reach (from the read-path and write-path issues).
	target float64
	// write: the job writes (and fio is not run --readonly).
	write bool
	// create: a write job whose file does not exist before it: fio
	// creates it (else fio may not create or extend the file).
	create bool
	// ioMode: fio's engine and O_DIRECT flags; nil: --direct=1
	// --ioengine=libaio --iodepth=16.
	ioMode []string
}

// io is the direction of fj that the job measures.
func (j fioJobSpec) io(fj fioJob) fioIO {
	if j.write {
		return fj.Write
	}
	return fj.Read
}

func benchJobs() []fioJobSpec {
	return []fioJobSpec{
		{
			key: "randread", label: "4k randread", unit: "IOPS",
			args:   []string{"--rw=randread", "--bs=4k", "--norandommap", "--randrepeat=0"},
			value:  func(r fioResult) float64 { return r.job.Read.IOPS },
			target: 0.95,
		},
		{
			key: "seqread", label: "1M seq read", unit: "MiB/s",
			args:   []string{"--rw=read", "--bs=1M"},
			value:  func(r fioResult) float64 { return r.job.Read.MiBps() },
			target: 0.90,
		},
	}
}

// fioTarget is a file fio reads; pid is the bucketfs process serving it
// (0 for the native file).
type fioTarget struct {
	label string
	path  string
	pid   int
}

type fioResult struct {
	job         fioJob
	daemonRead  int64 // bytes bucketfs read(2) during the job (rchar), -1 if unknown
	daemonWrote int64 // bytes bucketfs wrote with write(2) and friends (wchar), -1 if unknown
}

func (r fioResult) summary(j fioJobSpec) string {
	s := fmt.Sprintf("%s %s, p99 %.0f us", fmtNum(j.value(r)), j.unit, j.io(r.job).P99()/1e3)
	if j.write && r.daemonWrote >= 0 {
		s += ", daemon wrote " + sizeLabel(r.daemonWrote)
	} else if !j.write && r.daemonRead >= 0 {
		s += ", daemon read " + sizeLabel(r.daemonRead)
	}
	return s
}

// runFioJob runs one time-based job on tg (with O_DIRECT and libaio at
// depth 16 unless job.ioMode says otherwise), failing the test if fio
// fails or the job moved no data in its direction. A write job works on
// the existing file (fio may not create or extend it) unless job.create
// says fio creates it. No job fsyncs (no --end_fsync, no --fsync).
func runFioJob(t *testing.T, fioPath string, job fioJobSpec, tg fioTarget, cfg benchConfig) fioResult {
	t.Helper()
	mode := []string{"--readonly"}
	switch {
	case job.write && job.create:
		mode = []string{"--fallocate=none"}
	case job.write:
		mode = []string{"--allow_file_create=0", "--fallocate=none"}
	}
	ioMode := job.ioMode
	if ioMode == nil {
		ioMode = []string{"--direct=1", "--ioengine=libaio", "--iodepth=16"}
	}
	args := append([]string{
		"--name=" + job.key,
		"--filename=" + tg.path,
		"--size=" + strconv.FormatInt(cfg.size, 10),
	}, mode...)
	args = append(args, ioMode...)
	args = append(args,
		"--numjobs=1",
		"--time_based",
		fmt.Sprintf("--runtime=%ds", int(cfg.runtime/time.Second)),
		fmt.Sprintf("--ramp_time=%ds", int(cfg.ramp/time.Second)),
		"--output-format=json",
	)
	args = append(args, job.args...)
	beforeR, beforeW := procIOBytes(tg.pid, "rchar"), procIOBytes(tg.pid, "wchar")
	ctx, cancel := context.WithTimeout(context.Background(), cfg.runtime+cfg.ramp+3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, fioPath, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fio %s on %s: %v\nargs: %q\nstderr: %s\nstdout: %s", job.key, tg.label, err, args, stderr.String(), out)
	}
	j, err := parseFio(out)
	if err != nil {
		t.Fatalf("fio %s on %s: %v\nstderr: %s\nstdout: %s", job.key, tg.label, err, stderr.String(), out)
	}
	if job.io(j).IOBytes <= 0 {
		t.Fatalf("fio %s on %s: the job moved no data in its direction\nstdout: %s", job.key, tg.label, out)
	}
	r := fioResult{job: j, daemonRead: -1, daemonWrote: -1}
	if after := procIOBytes(tg.pid, "rchar"); beforeR >= 0 && after >= 0 {
		r.daemonRead = after - beforeR
	}
	if after := procIOBytes(tg.pid, "wchar"); beforeW >= 0 && after >= 0 {
		r.daemonWrote = after - beforeW
	}
	return r
}

// procIOBytes returns a byte counter of /proc/PID/io (all threads) of
// process pid, or -1: rchar (bytes read with read(2) and friends) or wchar
// (written with write(2) and friends). A passthrough read or write never
// reaches the daemon, so its counters hardly move; a FUSE_READ costs the
// daemon a read of /dev/fuse plus a pread of the cache file, a FUSE_WRITE a
// read of /dev/fuse (rchar) plus a pwrite of the cache file (wchar).
func procIOBytes(pid int, field string) int64 {
	if pid <= 0 {
		return -1
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+": "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// hashFile reads path to its end and returns its sha256 and length, failing
// the test if that takes longer than limit.
func hashFile(t *testing.T, path string, limit time.Duration) (string, int64) {
	t.Helper()
	type res struct {
		sum string
		n   int64
		err error
	}
	ch := make(chan res, 1)
	go func() {
		f, err := os.Open(path)
		if err != nil {
			ch <- res{err: err}
			return
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.CopyBuffer(h, f, make([]byte, 1<<20))
		ch <- res{fmt.Sprintf("%x", h.Sum(nil)), n, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("reading %s: %v", path, r.err)
		}
		return r.sum, r.n
	case <-time.After(limit):
		t.Fatalf("reading %s: not done within %v", path, limit)
		return "", 0
	}
}

// warmCache mounts on cacheDir with args, reads name once in full through
// the mount (checking its length and sha256), and unmounts cleanly, which
// waits for the copy to be synced and recorded in the cache's index.
func warmCache(t *testing.T, emu *emulator.Server, cacheDir string, args []string, label, name string, size int64, wantSum string) {
	t.Helper()
	m := mount(t, emu, mountOpts{cacheDir: cacheDir, args: args})
	start := time.Now()
	got, n := hashFile(t, m.path(name), 10*time.Minute)
	d := time.Since(start)
	if n != size || got != wantSum {
		t.Fatalf("warming read (%s): %d bytes, sha256 %s; want %d bytes, sha256 %s", label, n, got, size, wantSum)
	}
	t.Logf("warmed cache for %s in %v (%.0f MiB/s, no WAN), checksum ok", label, d.Round(time.Millisecond), mibps(n, d))
	m.unmount(t)
}

// writeSynced writes data to a new file and syncs it to disk.
func writeSynced(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// sameFilesystem checks that the native file and the cache live on one
// filesystem, as the comparison assumes, and describes it.
func sameFilesystem(t *testing.T, a, b string) string {
	t.Helper()
	sa, sb, same := statBoth(t, a, b)
	if !same {
		t.Logf("warning: native dir %s and cache dir %s are on different filesystems; the cached/native ratios compare different disks", a, b)
		return fmt.Sprintf("native dir and cache dir on DIFFERENT filesystems (type 0x%x vs 0x%x)", sa.Type, sb.Type)
	}
	return fmt.Sprintf("native file and cache on the same filesystem (statfs type 0x%x, fsid %x, %s free), both under %s",
		sa.Type, sa.Fsid.X__val, sizeLabel(int64(sa.Bavail)*sa.Bsize), os.TempDir())
}

// statBoth returns statfs of paths a and b, and whether they are on one
// filesystem.
func statBoth(t *testing.T, a, b string) (sa, sb syscall.Statfs_t, same bool) {
	t.Helper()
	if err := syscall.Statfs(a, &sa); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Statfs(b, &sb); err != nil {
		t.Fatal(err)
	}
	return sa, sb, sa.Fsid == sb.Fsid
}

// machineFacts describes where the numbers were taken.
func machineFacts(fioPath string, cfg benchConfig) string {
	run := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return "? (" + err.Error() + ")"
		}
		return strings.TrimSpace(string(out))
	}
	cpu := "?"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "date:    %s\n", time.Now().Format(time.RFC3339))
	fmt.Fprintf(&b, "tree:    %s\n", run("git", "describe", "--tags", "--always", "--dirty"))
	fmt.Fprintf(&b, "kernel:  %s\n", run("uname", "-r"))
	fmt.Fprintf(&b, "nproc:   %s\n", run("nproc"))
	fmt.Fprintf(&b, "cpu:     %s\n", cpu)
	fmt.Fprintf(&b, "go:      %s (test binary built with %s)\n", run("go", "version"), runtime.Version())
	fmt.Fprintf(&b, "fio:     %s (%s)\n", run(fioPath, "--version"), fioPath)
	fmt.Fprintf(&b, "config:  fio runtime %v + %v ramp per job, %d repeat(s) (medians), files of %s, %d small files per run, upload parallelism %v\n",
		cfg.runtime, cfg.ramp, cfg.repeat, sizeLabel(cfg.size), cfg.smallFiles, cfg.drainPars)
	if v := os.Getenv("BENCH_ONLY"); v != "" {
		fmt.Fprintf(&b, "only:    %s\n", v)
	}
	return b.String()
}

// benchRow is one line of the report.
type benchRow struct {
	name, native, bucketfs, ratio, target, met, note string
}

type benchTable struct{ rows []benchRow }

func (tb *benchTable) add(r benchRow) { tb.rows = append(tb.rows, r) }

func (tb *benchTable) String() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "case\tnative\tbucketfs\tratio\ttarget\tmet\tnote")
	for _, r := range tb.rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.name, r.native, r.bucketfs, r.ratio, r.target, r.met, r.note)
	}
	w.Flush()
	return b.String()
}

func metStr(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func fmtNum(v float64) string {
	if v < 100 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

func fmtRatio(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func mibps(n int64, d time.Duration) float64 { return float64(n) / (1 << 20) / d.Seconds() }

// sizeLabel prints n bytes in a short binary unit: "1 GiB", "25 MiB".
func sizeLabel(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + " GiB"
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 0, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 0, 64) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianOf(rs []fioResult, f func(fioResult) float64) float64 {
	vs := make([]float64, len(rs))
	for i, r := range rs {
		vs[i] = f(r)
	}
	return median(vs)
}
