package integration

import (
	"bufio"
	"fmt"
	"io"
	"iter"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil/testemu"
)

// The scale section (issue 25): names in bounded memory. A bucket of
// 1,100,000 objects in the emulator's seeded store (100,000 in one
// directory, 1,000 directories of 1,000), no WAN shaping, default
// flags but --metadata-ttl 1h (the walk must not be a race with the
// TTL). It measures, on the bucketfs process: ls -f and ls -l of the
// 100,000-name directory (fresh, then after a remount), find over the
// 1,000,000 names; the time of each, the RSS after it and the peak RSS
// (VmHWM). BENCH_SCALE_10M=1 adds a find over 10,000,000 objects
// (10,000 directories of 1,000): the bound. BENCH_SCALE_PROFILE=DIR saves
// the mount's heap profiles after ls -l and find there, and a CPU profile
// of ls -l; BENCH_SCALE_ENV sets environment variables of the mounts
// (GOGC=50).

const (
	scaleFlat     = 100_000
	scaleTreeDirs = 1_000
	scaleTreeEach = 1_000
)

// seedNames returns n seeds named by name(i); objects of a few bytes.
func seedNames(n int, name func(i int) string) iter.Seq[emulator.Seed] {
	data := []byte("x\n")
	return func(yield func(emulator.Seed) bool) {
		for i := range n {
			if !yield(emulator.Seed{Name: name(i), Data: data}) {
				return
			}
		}
	}
}

// procStatusKiB returns a field of /proc/pid/status in KiB (VmRSS, VmHWM).
func procStatusKiB(t testing.TB, pid int, field string) float64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// scaleStep is one measured command on a mount.
type scaleStep struct {
	secs, rss, peak float64 // seconds; MiB after it; MiB at most so far
	anon, file      float64 // MiB of rss: anonymous (the heap), mapped files (names.db, the binary)
	lines           int
}

// runOnMount runs a shell command line in the mount's directory with
// stdout counted, and measures it.
func runOnMount(t testing.TB, m *mountProc, cmdline string, limit time.Duration) scaleStep {
	t.Helper()
	secs, n := runIn(t, m.dir, cmdline, limit)
	pid := m.cmd.Process.Pid
	return scaleStep{secs: secs, lines: n,
		rss: procStatusKiB(t, pid, "VmRSS") / 1024, peak: procStatusKiB(t, pid, "VmHWM") / 1024,
		anon: procStatusKiB(t, pid, "RssAnon") / 1024, file: procStatusKiB(t, pid, "RssFile") / 1024}
}

// runIn runs cmdline in dir and returns how long it took and how many
// lines it wrote.
func runIn(t testing.TB, dir, cmdline string, limit time.Duration) (secs float64, lines int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", cmdline+" | wc -l")
	cmd.Dir = dir
	start := time.Now()
	done := make(chan struct{})
	var out []byte
	var err error
	go func() {
		out, err = cmd.Output()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s: not done in %v", cmdline, limit)
	}
	secs = time.Since(start).Seconds()
	if err != nil {
		t.Fatalf("%s: %v", cmdline, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return secs, n
}

func benchScale(t *testing.T, cfg benchConfig, tbl *benchTable) []string {
	emu := testemu.Start(t, emulator.Options{Buckets: []string{testBucket}, Seeded: true})
	start := time.Now()
	if _, err := emu.PutMany(testBucket, seedNames(scaleFlat, func(i int) string { return fmt.Sprintf("flat/f%06d", i) })); err != nil {
		t.Fatal(err)
	}
	if _, err := emu.PutMany(testBucket, seedNames(scaleTreeDirs*scaleTreeEach, func(i int) string {
		return fmt.Sprintf("tree/d%04d/f%04d", i/scaleTreeEach, i%scaleTreeEach)
	})); err != nil {
		t.Fatal(err)
	}
	huge := os.Getenv("BENCH_SCALE_10M") == "1"
	if huge {
		if _, err := emu.PutMany(testBucket, seedNames(10_000*1_000, func(i int) string {
			return fmt.Sprintf("huge/d%05d/f%04d", i/1_000, i%1_000)
		})); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("scale: seeded in %v", time.Since(start))

	args := append([]string{"--metadata-ttl", "1h"}, strings.Fields(os.Getenv("BENCH_SCALE_ARGS"))...)
	profDir := os.Getenv("BENCH_SCALE_PROFILE")
	if profDir != "" {
		args = append(args, "--metrics-addr", "127.0.0.1:0", "--pprof")
	}
	// heap saves the mount's heap profile as BENCH_SCALE_PROFILE/NAME.
	heap := func(m *mountProc, name string) {
		if profDir == "" {
			return
		}
		url := strings.TrimSuffix(m.metricsURL(t), "/metrics") + "/debug/pprof/heap?gc=1"
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if err := os.WriteFile(filepath.Join(profDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mount := func(cacheDir string) *mountProc {
		m, err := spawnMount(t, emu, mountOpts{cacheDir: cacheDir, args: args, env: strings.Fields(os.Getenv("BENCH_SCALE_ENV"))})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.waitReady(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	want := func(s scaleStep, what string, n int) {
		if s.lines != n {
			t.Fatalf("%s: %d lines, want %d", what, s.lines, n)
		}
	}

	var lsf, lsl, relsl, busy, find []scaleStep
	for rep := range cfg.repeat {
		cacheDir := t.TempDir()
		m := mount(cacheDir)
		f := runOnMount(t, m, "ls -f flat", 5*time.Minute)
		want(f, "ls -f", scaleFlat+2)
		m.unmount(t)

		cacheDir = t.TempDir()
		m = mount(cacheDir)
		cpu := cpuProfile(t, m, profDir, "cpu-ls-l.prof")
		l := runOnMount(t, m, "ls -l flat", 5*time.Minute)
		<-cpu
		want(l, "ls -l", scaleFlat+1)
		heap(m, "heap-ls-l.prof")
		m.unmount(t)
		m = mount(cacheDir)
		r := runOnMount(t, m, "ls -l flat", 5*time.Minute)
		want(r, "ls -l after a remount", scaleFlat+1)
		heap(m, "heap-remount-ls-l.prof")
		m.unmount(t)
		// Again, with the machine busy: two processes spinning beside
		// the mount (as many as this machine has cores), so that the
		// garbage collector runs behind the allocations (issue 38).
		m = mount(cacheDir)
		stop := burnCPU(t, 2)
		rb := runOnMount(t, m, "ls -l flat", 5*time.Minute)
		stop()
		want(rb, "ls -l after a remount, busy", scaleFlat+1)
		m.unmount(t)

		m = mount(t.TempDir())
		w := runOnMount(t, m, "find tree", 10*time.Minute)
		want(w, "find", scaleTreeDirs*scaleTreeEach+scaleTreeDirs+1)
		heap(m, "heap-find.prof")
		m.unmount(t)
		t.Logf("scale repeat %d: ls -f %.2fs %.0f MiB; ls -l %.2fs %.0f MiB (peak %.0f, anon %.0f, files %.0f); after a remount %.2fs %.0f MiB (peak %.0f, anon %.0f, files %.0f); busy %.2fs %.0f MiB (peak %.0f, anon %.0f, files %.0f); find 1M %.1fs %.0f MiB (peak %.0f)",
			rep+1, f.secs, f.rss, l.secs, l.rss, l.peak, l.anon, l.file, r.secs, r.rss, r.peak, r.anon, r.file, rb.secs, rb.rss, rb.peak, rb.anon, rb.file, w.secs, w.rss, w.peak)
		lsf, lsl, relsl, busy, find = append(lsf, f), append(lsl, l), append(relsl, r), append(busy, rb), append(find, w)
	}
	// met judges the medians of seconds, VmRSS and RssAnon (MiB).
	row := func(name string, steps []scaleStep, target string, met func(secs, rss, anon float64) bool) {
		secs := median(collect(steps, func(s scaleStep) float64 { return s.secs }))
		rss := median(collect(steps, func(s scaleStep) float64 { return s.rss }))
		peak := median(collect(steps, func(s scaleStep) float64 { return s.peak }))
		anon := median(collect(steps, func(s scaleStep) float64 { return s.anon }))
		tbl.add(benchRow{
			name:     name,
			native:   "-",
			bucketfs: fmt.Sprintf("%ss, RSS %s MiB (peak %s, anon %s)", fmtSec(secs), fmtNum(rss), fmtNum(peak), fmtNum(anon)),
			ratio:    "-",
			target:   target,
			met:      metStr(met(secs, rss, anon)),
			note:     "medians; RSS (VmRSS) of the bucketfs process after the command, peak = VmHWM, anon = RssAnon (its own memory; the rest is mapped files: names.db, the binary)",
		})
	}
	row("scale: ls -f of 100,000 names", lsf, "<= 2.5 s", func(s, _, _ float64) bool { return s <= 2.5 })
	row("scale: ls -l of 100,000 names", lsl, "RssAnon <= 150 MiB", func(_, _, a float64) bool { return a <= 150 })
	row("scale: ls -l of 100,000 after a remount", relsl, "RssAnon <= 150 MiB", func(_, _, a float64) bool { return a <= 150 })
	row("scale: the same, 2 processes spinning beside", busy, "RssAnon <= 150 MiB", func(_, _, a float64) bool { return a <= 150 })
	row("scale: find over 1,000,000 names", find, "<= 31 s, RSS <= 400 MiB", func(s, r, _ float64) bool { return s <= 31 && r <= 400 })
	if huge {
		m := mount(t.TempDir())
		w := runOnMount(t, m, "find huge", 60*time.Minute)
		want(w, "find 10M", 10_000*1_000+10_000+1)
		m.unmount(t)
		t.Logf("scale: find 10M %.1fs %.0f MiB (peak %.0f)", w.secs, w.rss, w.peak)
		row("scale: find over 10,000,000 names", []scaleStep{w}, "RSS <= 1 GiB", func(_, r, _ float64) bool { return r <= 1024 })
	}
	return []string{"scale: the emulator's seeded store, no WAN profile; objects of 2 bytes; BENCH_SCALE_ARGS adds mount flags"}
}

// burnCPU starts n processes that spin (sh loops) until the returned
// function is called, which stops and waits for them; they are stopped
// at the end of the test too.
func burnCPU(t *testing.T, n int) func() {
	var cmds []*exec.Cmd
	for range n {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	t.Cleanup(stop)
	return stop
}

// cpuProfile saves 8 s of the mount's CPU profile as dir/name, if dir is
// set; the channel is closed when it is saved.
func cpuProfile(t *testing.T, m *mountProc, dir, name string) <-chan struct{} {
	done := make(chan struct{})
	if dir == "" {
		close(done)
		return done
	}
	url := strings.TrimSuffix(m.metricsURL(t), "/metrics") + "/debug/pprof/profile?seconds=8"
	go func() {
		defer close(done)
		resp, err := http.Get(url)
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Error(err)
		}
	}()
	return done
}

// collect maps steps to values.
func collect[T any](xs []T, f func(T) float64) []float64 {
	out := make([]float64, 0, len(xs))
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}
