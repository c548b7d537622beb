package integration

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The write half of 'make bench' (see TestBench for the knobs). Three
// sections, each selectable with BENCH_ONLY:
//
//   - fio-write (old name cached-write): fio writes on new and on cached
//     files, buffered and O_DIRECT, against native buffered and native
//     O_DIRECT writes; see bench_fiowrite_test.go.
//   - small-files: an os.WriteFile loop creating many 4 KiB files in a new
//     directory, on bucketfs and on a go-fuse loopback mount of a directory
//     on the same disk (in-process, the same kernel timeouts as bucketfs);
//     then the drain of those files to the bucket at unmount, behind the
//     WAN profile, with --upload-parallelism 8 (the default; more with
//     BENCH_DRAIN_PARALLELISM). Every file must be in the bucket, a sample
//     byte-exact. And the careful save, file after file, with its fsyncs
//     (bench_saves_test.go).
//   - drain: a new file of BENCH_SIZE_MIB written through the mount, then
//     drained by the unmount behind the WAN profile, over plain HTTP and
//     over TLS with each --client-protocol; size and sha256 are checked
//     in the bucket.

const (
	benchWriteBig = "bench-write-drain.bin"

	// benchWriteBackDelay holds uploads back during the timed part of
	// the write cases: nothing leaves before the unmount flushes.
	benchWriteBackDelay = "1h"
	smallFileSize       = 4 << 10
)

// benchWrites runs the selected write sections, adds their rows to tbl and
// returns their notes.
func benchWrites(t *testing.T, emu *emulator.Server, fioPath string, cfg benchConfig, tbl *benchTable) []string {
	t.Helper()
	var notes []string
	if cfg.runs("fio-write") {
		notes = append(notes, benchFioWrites(t, emu, fioPath, cfg, tbl)...)
	}
	if cfg.runs("small-files") {
		notes = append(notes, benchSmallFiles(t, cfg, tbl)...)
	}
	if cfg.runs("write-out") {
		notes = append(notes, benchWriteOut(t, tbl)...)
	}
	if cfg.runs("saves") {
		notes = append(notes, benchSaves(t, cfg, tbl)...)
	}
	if cfg.runs("drain") {
		notes = append(notes, benchBigDrain(t, cfg, tbl)...)
	}
	return notes
}

// benchSmallFiles is the small-files section: one run per upload
// parallelism in BENCH_DRAIN_PARALLELISM (default 8 alone: with 10,000
// files a drain takes minutes, see the notes), whatever BENCH_REPEAT. A run
// times the create loop on the loopback mount, on bucketfs, and on the
// loopback mount again (the two loopback loops are averaged, so neither
// side always goes first), then the drain of bucketfs's files. Each run has
// its own emulator: the fake keeps a bucket's objects in a list it scans on
// every request, so objects piling up from run to run would slow the later
// drains. Nothing is deleted between the loops (the test's temporary
// directories go at its end): ext4 allocates inodes more slowly right
// after many were freed, which would tax whichever loop comes next.
func benchSmallFiles(t *testing.T, cfg benchConfig, tbl *benchTable) []string {
	t.Helper()
	n := cfg.smallFiles
	wan := emulator.DefaultWAN()

	var bfRates, lbRates, ratios, bfReqs, bfCPUs []float64
	type drain struct {
		par                        int
		rate, wall, bfsCPU, emuCPU float64 // files/s; seconds
	}
	var drains []drain
	for i, par := range cfg.drainPars {
		emu := startEmulator(t, nil)
		contents := testutil.RandomBytes(n*smallFileSize, uint64(600+i))
		dir := fmt.Sprintf("small-%d", i+1)
		m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", benchWriteBackDelay,
			"--upload-parallelism", strconv.Itoa(par), "--flush-timeout", "50m"}})
		pid := m.cmd.Process.Pid

		loopback := func() time.Duration {
			backing := t.TempDir()
			lm := mountLoopback(t, backing)
			d := createFiles(t, filepath.Join(lm.dir, dir), n, contents)
			lm.unmount(t)
			return d
		}
		lb1 := loopback()
		emu.ResetCounters()
		cpu0 := procCPU(pid)
		bf := createFiles(t, m.path(dir), n, contents)
		bfCPU := procCPU(pid) - cpu0
		reqs := emu.Requests()
		lb2 := loopback()

		bfRate, lbRate := float64(n)/bf.Seconds(), float64(2*n)/(lb1+lb2).Seconds()
		bfRates, lbRates = append(bfRates, bfRate), append(lbRates, lbRate)
		ratios = append(ratios, bfRate/lbRate)
		bfReqs = append(bfReqs, float64(reqs))
		bfCPUs = append(bfCPUs, bfCPU.Seconds())
		t.Logf("run %d: created %d x 4 KiB files: bucketfs %.0f files/s (%d bucket requests, %.1fs CPU in bucketfs), loopback %.0f then %.0f files/s, ratio %.2f",
			i+1, n, bfRate, reqs, bfCPU.Seconds(), float64(n)/lb1.Seconds(), float64(n)/lb2.Seconds(), bfRate/lbRate)

		// The drain: the unmount returns once every file is in the bucket.
		// The test process does nothing but serve the emulator meanwhile,
		// so its CPU time is the emulator's.
		var uploads atomic.Int64
		emu.SetHook(func(r *http.Request) (int, bool) {
			if isUploadReq(r) {
				uploads.Add(1)
			}
			return 0, false
		})
		emu.SetWAN(&wan)
		bfs0, self0 := procCPU(pid), selfCPU()
		d := unmountTimed(t, m, 50*time.Minute)
		selfUsed := selfCPU() - self0
		emu.SetWAN(nil)
		emu.SetHook(nil)
		var bfsUsed time.Duration
		if ps := m.cmd.ProcessState; ps != nil && bfs0 >= 0 {
			bfsUsed = ps.UserTime() + ps.SystemTime() - bfs0
		}
		dr := drain{par: par, rate: float64(n) / d.Seconds(), wall: d.Seconds(), bfsCPU: bfsUsed.Seconds(), emuCPU: selfUsed.Seconds()}
		drains = append(drains, dr)
		checked := checkSmallFiles(t, emu, dir, n, contents)
		t.Logf("run %d: drained %d files under WAN with --upload-parallelism %d in %v: %.0f files/s, %d upload requests, CPU %.1fs in bucketfs and %.1fs in the emulator; all in the bucket, %d sampled byte-exact",
			i+1, n, par, d.Round(time.Millisecond), dr.rate, uploads.Load(), dr.bfsCPU, dr.emuCPU, checked)
	}

	ratio := median(ratios)
	runs := ""
	if len(ratios) > 1 {
		runs = fmt.Sprintf(", medians of %d runs", len(ratios))
	}
	tbl.add(benchRow{
		name:     fmt.Sprintf("create %d x 4 KiB files (files/s)", n),
		native:   "loopback " + fmtNum(median(lbRates)),
		bucketfs: fmtNum(median(bfRates)),
		ratio:    fmtRatio(ratio),
		target:   ">= 0.70 of loopback",
		met:      metStr(ratio >= 0.70),
		note: fmt.Sprintf("ratio: bucketfs / loopback; no WAN; %.0f bucket requests and %.1fs CPU in bucketfs during the loop%s",
			median(bfReqs), median(bfCPUs), runs),
	})
	perReq := wan.Latency.Seconds()
	emuBound := false
	for _, dr := range drains {
		ceiling := float64(dr.par) / perReq
		note := fmt.Sprintf("unmount took %.1fs; CPU %.0fs in bucketfs, %.0fs in the emulator; all in the bucket, sample byte-exact", dr.wall, dr.bfsCPU, dr.emuCPU)
		if dr.emuCPU >= 0.7*dr.wall {
			emuBound = true
			note = "EMULATOR-BOUND (see notes); " + note
		}
		tbl.add(benchRow{
			name:     fmt.Sprintf("drain %d small files, WAN (files/s), --upload-parallelism %d", n, dr.par),
			native:   "ceil " + fmtNum(ceiling),
			bucketfs: fmtNum(dr.rate),
			ratio:    fmtRatio(dr.rate / ceiling),
			target:   "-",
			met:      "-",
			note:     note,
		})
	}
	notes := []string{
		fmt.Sprintf("create row: an os.WriteFile loop into a new directory, on bucketfs (--write-back-delay %s) and on a go-fuse loopback mount "+
			"(fs.NewLoopbackRoot, served by the test process) of a directory on the same disk, with bucketfs's kernel timeouts (%v) and max write; "+
			"the loopback value averages a loop before and one after bucketfs's", benchWriteBackDelay, time.Minute),
		fmt.Sprintf("drain rows: time from SIGTERM to exit after the create loop, with the emulator behind the WAN profile; one upload request per file, "+
			"so %v per request caps 8 uploads in flight (the default) at %.0f files/s, 64 at %.0f", wan.Latency, 8/perReq, 64/perReq),
	}
	if emuBound {
		notes = append(notes, "EMULATOR-BOUND drains: the emulator used most of a core or more: its backend (fake-gcs-server's memory store) finds an object "+
			"by scanning every object of the bucket, formatting an ID with fmt.Sprintf for each, several times per upload, so each upload costs "+
			"more as the bucket fills and the drain of thousands of files measures the emulator, not bucketfs (a larger --upload-parallelism cannot help)")
	}
	return notes
}

// procCPU returns the CPU time (user and system, all threads) process pid
// has used so far, or -1.
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The fields after the command name, which is in parentheses and may
	// hold anything: state is field 3, utime 14 and stime 15.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return -1
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	// In clock ticks of USER_HZ, which is 100 on Linux for every
	// architecture that bucketfs runs on.
	return time.Duration(ut+st) * (time.Second / 100)
}

// selfCPU returns the CPU time the test process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// createFiles makes dir and writes n files of smallFileSize bytes into it
// from contents, one os.WriteFile each; it returns the time of the writes
// (not the mkdir), failing the test on error or after 10 minutes.
func createFiles(t *testing.T, dir string, n int, contents []byte) time.Duration {
	t.Helper()
	return timedLoop(t, fmt.Sprintf("creating %d files in %s", n, dir), func() (time.Duration, error) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return 0, err
		}
		start := time.Now()
		for i := range n {
			if err := os.WriteFile(filepath.Join(dir, smallName(i)), smallContent(contents, i), 0o644); err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	})
}

// timedLoop runs loop, which returns how long its timed part took, in a
// goroutine of its own, failing the test (named by what) on its error or
// if it has not ended after 10 minutes (a hung mount).
func timedLoop(t *testing.T, what string, loop func() (time.Duration, error)) time.Duration {
	t.Helper()
	type res struct {
		d   time.Duration
		err error
	}
	ch := make(chan res, 1)
	go func() {
		d, err := loop()
		ch <- res{d, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.d
	case <-time.After(10 * time.Minute):
		t.Fatalf("%s: not done within 10 minutes", what)
		return 0
	}
}

func smallName(i int) string { return fmt.Sprintf("f%05d", i) }

func smallContent(contents []byte, i int) []byte {
	return contents[i*smallFileSize : (i+1)*smallFileSize]
}

// checkSmallFiles checks that all n files are in the bucket under dir/
// and that a sample of them (100, spread evenly, and the last) is
// byte-exact. It returns how many were compared.
func checkSmallFiles(t *testing.T, emu *emulator.Server, dir string, n int, contents []byte) int {
	t.Helper()
	files := 0
	for _, name := range listObjects(t, emu, dir+"/") {
		if name != dir+"/" {
			files++
		}
	}
	if files != n {
		t.Fatalf("after the drain the bucket has %d objects under %s/, want %d", files, dir, n)
	}
	idx := []int{n - 1}
	for k := range 100 {
		idx = append(idx, k*n/100)
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		name := dir + "/" + smallName(i)
		if got := object(t, emu, name); !bytes.Equal(got, smallContent(contents, i)) {
			t.Fatalf("after the drain %s in the bucket has %d bytes that differ from what was written (%d bytes)", name, len(got), smallFileSize)
		}
	}
	return len(idx)
}

// benchBigDrain is the drain section: one new file of cfg.size written
// through the mount, then uploaded by the unmount behind the WAN profile,
// over plain HTTP and over TLS with each --client-protocol (issue 23), in
// that order, each against an emulator of its own.
func benchBigDrain(t *testing.T, cfg benchConfig, tbl *benchTable) []string {
	t.Helper()
	wan := emulator.DefaultWAN()
	capMiB := float64(wan.Total) / (1 << 20)
	plain := 0.0
	for i, tc := range transportCases() { // bench_cold_test.go
		v, note := drainOnce(t, cfg, tc, wan)
		if i == 0 {
			plain = v
		}
		row := benchRow{
			name:     fmt.Sprintf("drain one dirty %s file, WAN, %s (MiB/s)", sizeLabel(cfg.size), tc.label),
			native:   "cap " + fmtNum(capMiB),
			bucketfs: fmtNum(v),
			ratio:    fmtRatio(v / capMiB),
			target:   ">= 0.80 of cap",
			met:      metStr(v/capMiB >= 0.80),
			note:     note,
		}
		if tc.tls {
			row.note = fmt.Sprintf("%.2f of the plain HTTP row; ", v/plain) + row.note
			if tc.args == nil {
				row.target = ">= 0.80 of plain"
				row.met = metStr(v/plain >= 0.80)
			} else {
				row.target, row.met = "-", "-"
			}
		}
		tbl.add(row)
	}
	return []string{fmt.Sprintf("drain rows: a new file written through the mount with --write-back-delay %s, then the time from SIGTERM to exit "+
		"(the unmount returns once it is in the bucket) with the emulator behind the WAN profile; taken once each (the WAN shaper, not the machine, sets it)",
		benchWriteBackDelay)}
}

// drainOnce writes a new file of cfg.size through a mount reaching a new
// emulator the way tc says, times its drain by the unmount behind wan,
// checks the bucket, and returns MiB/s and a note.
func drainOnce(t *testing.T, cfg benchConfig, tc transportCase, wan emulator.WANProfile) (float64, string) {
	t.Helper()
	emu := startEmulator(t, nil)
	defer emu.Close() // a GiB of memory each
	args := append([]string{"--cache-max-size", "4GiB", "--write-back-delay", benchWriteBackDelay, "--flush-timeout", "30m"}, tc.args...)
	// BENCH_DRAIN_ARGS: more mount flags, e.g. --offline-after 30s to keep
	// the breaker out of the comparison (on the loaded 2-core machine a
	// probe timed out while the in-process emulator composed a GiB, and
	// the mount went offline: the file was sent again).
	args = append(args, strings.Fields(os.Getenv("BENCH_DRAIN_ARGS"))...)
	m := mount(t, emu, mountOpts{tls: tc.tls, args: args})
	wantSum, wrote := writeStream(t, m.path(benchWriteBig), cfg.size, 505)
	t.Logf("wrote %s through the mount in %v of write calls (%.0f MiB/s)", sizeLabel(cfg.size), wrote.Round(time.Millisecond), mibps(cfg.size, wrote))

	var uploads, composes atomic.Int64
	emu.SetHook(func(r *http.Request) (int, bool) {
		if isUploadReq(r) {
			uploads.Add(1)
		}
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/compose") {
			composes.Add(1)
		}
		return 0, false
	})
	emu.ResetCounters()
	emu.SetWAN(&wan)
	d := unmountTimed(t, m, 30*time.Minute)
	emu.SetWAN(nil)
	emu.SetHook(nil)
	conns := emu.Connections() + emu.TLSConnections()
	var retries []string
	for _, line := range strings.Split(m.logs.String(), "\n") {
		// A failed try, the mount going offline, or an upload whose
		// answer was lost: each sends the file again.
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || strings.Contains(line, "not confirmed") {
			retries = append(retries, line)
		}
	}
	for _, line := range retries[:min(len(retries), 4)] {
		t.Logf("drain (%s): %s", tc.label, line)
	}

	obj := object(t, emu, benchWriteBig)
	if int64(len(obj)) != cfg.size || sum(obj) != wantSum {
		t.Fatalf("after the drain (%s) the bucket holds %d bytes, sha256 %s; wrote %d bytes, sha256 %s", tc.label, len(obj), sum(obj), cfg.size, wantSum)
	}
	v := mibps(cfg.size, d)
	perConn := float64(wan.PerConn) / (1 << 20)
	t.Logf("drained %s under WAN (%s) in %v: %.1f MiB/s, %d upload request(s), %d compose(s), %d new TCP connections; size and sha256 in the bucket ok",
		sizeLabel(cfg.size), tc.label, d.Round(time.Millisecond), v, uploads.Load(), composes.Load(), conns)
	return v, fmt.Sprintf("%d upload request(s) (parts) and %d compose(s) (the emulator has no XML multipart API) over %d new TCP connections, %d warning(s) logged, %.2f of the %.0f MiB/s per-connection limit; size and sha256 in the bucket ok; written through the mount at %.0f MiB/s",
		uploads.Load(), composes.Load(), conns, len(retries), v/perConn, perConn, mibps(cfg.size, wrote))
}

// writeStream writes size pseudo-random bytes (from seed) to a new file at
// path in 1 MiB writes and closes it. It returns their sha256 and the time
// spent in the write calls and the close.
func writeStream(t *testing.T, path string, size int64, seed uint64) (string, time.Duration) {
	t.Helper()
	type res struct {
		sum string
		d   time.Duration
		err error
	}
	ch := make(chan res, 1)
	go func() {
		f, err := os.Create(path)
		if err != nil {
			ch <- res{err: err}
			return
		}
		defer f.Close()
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		h := sha256.New()
		buf := make([]byte, 1<<20)
		var d time.Duration
		for left := size; left > 0; {
			b := buf[:min(int64(len(buf)), left)]
			for i := 0; i+8 <= len(b); i += 8 {
				v := rng.Uint64()
				for j := range 8 {
					b[i+j] = byte(v >> (8 * j))
				}
			}
			h.Write(b)
			start := time.Now()
			if _, err := f.Write(b); err != nil {
				ch <- res{err: err}
				return
			}
			d += time.Since(start)
			left -= int64(len(b))
		}
		start := time.Now()
		if err := f.Close(); err != nil {
			ch <- res{err: err}
			return
		}
		d += time.Since(start)
		ch <- res{sum: fmt.Sprintf("%x", h.Sum(nil)), d: d}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("writing %s: %v", path, r.err)
		}
		return r.sum, r.d
	case <-time.After(10 * time.Minute):
		t.Fatalf("writing %s: not done within 10 minutes", path)
		return "", 0
	}
}

// unmountTimed is mountProc.unmount with a limit fit for a long flush: it
// sends SIGTERM, waits up to limit for a clean exit and returns how long
// that took (unmount, flush of every change to the bucket, exit).
func unmountTimed(t *testing.T, m *mountProc, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal: %v", err)
	}
	select {
	case <-m.exited:
	case <-time.After(limit):
		t.Fatalf("bucketfs did not exit within %v of SIGTERM:\n%s", limit, m.logs.String())
	}
	d := time.Since(start)
	if m.waitErr != nil {
		t.Fatalf("bucketfs exited with %v:\n%s", m.waitErr, m.logs.String())
	}
	if mounted(m.dir) {
		t.Fatalf("%s is still mounted after bucketfs exited", m.dir)
	}
	return d
}

// loopbackMount is a go-fuse loopback filesystem served by the test
// process: the baseline for a FUSE daemon that does nothing but pass
// operations on to a local directory.
type loopbackMount struct {
	dir string
	srv *fuse.Server
}

// mountLoopback mounts backing on a new directory with the kernel
// timeouts and write size bucketfs uses by default. It is unmounted when
// the test ends, lazily if need be.
func mountLoopback(t *testing.T, backing string) *loopbackMount {
	t.Helper()
	root, err := gofs.NewLoopbackRoot(backing)
	if err != nil {
		t.Fatal(err)
	}
	ttl := time.Minute
	dir := t.TempDir()
	srv, err := gofs.Mount(dir, root, &gofs.Options{
		MountOptions: fuse.MountOptions{
			FsName:   "loopback:" + backing,
			Name:     "loopback",
			MaxWrite: 1 << 20,
			Options:  []string{"default_permissions"},
		},
		EntryTimeout:    &ttl,
		AttrTimeout:     &ttl,
		NegativeTimeout: &ttl,
	})
	if err != nil {
		t.Fatalf("loopback mount of %s: %v", backing, err)
	}
	lm := &loopbackMount{dir: dir, srv: srv}
	t.Cleanup(lm.stop)
	return lm
}

// unmount takes the loopback mount down, failing the test if it cannot.
func (l *loopbackMount) unmount(t *testing.T) {
	t.Helper()
	if err := l.srv.Unmount(); err != nil {
		t.Fatalf("unmounting the loopback mount %s: %v", l.dir, err)
	}
}

// stop takes the mount down whatever its state, lazily if it is busy.
func (l *loopbackMount) stop() {
	if !mounted(l.dir) {
		return
	}
	if err := l.srv.Unmount(); err != nil {
		exec.Command("fusermount3", "-uz", l.dir).Run()
	}
}
