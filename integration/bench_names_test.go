package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	fsnames "github.com/bucketfs/bucketfs/fs/names"
	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/transfer"
)

// The names section of 'make bench' (BENCH_ONLY=names):
//
//   - a stat/open/readdir storm on 2,000 cached files in 20 directories
//     (ls -lR, then an open and close of each file), behind the WAN
//     profile, on three mounts of one bucket measured in turn: within
//     the TTL (--metadata-ttl 10m: the kernel answers most of it), past
//     it (--metadata-ttl 1s, the storm starting after the TTL ran out:
//     answered from what is known, refreshed in the background), and
//     past it in strict mode (--metadata-strict: every expired name
//     waits for the bucket, the old behaviour);
//   - mount-ready time (from the start of the process to its "mounted"
//     line) and RSS of the bucketfs process, with names.db holding
//     100,000 names (100 directories of 1,000 files), against the same
//     with an empty cache directory; RSS also after ls -R of the whole
//     tree (every directory loaded from names.db).

const (
	stormDirs, stormFiles = 20, 100 // 2,000 files
	namesDirs, namesFiles = 100, 1000
)

func benchNames(t *testing.T, cfg benchConfig, tbl *benchTable) []string {
	t.Helper()
	notes := benchStorm(t, cfg, tbl)
	return append(notes, benchNamesReady(t, cfg, tbl)...)
}

// storm runs ls -lR of dir and opens and closes every file, and returns
// how long it took.
func storm(t *testing.T, dir string) time.Duration {
	t.Helper()
	start := time.Now()
	seen := lsLR(t, dir)
	files := 0
	for _, s := range seen {
		rel, _, _ := strings.Cut(s, " ")
		if !strings.HasSuffix(s, " false") {
			continue
		}
		f, err := os.Open(filepath.Join(dir, rel))
		if err != nil {
			t.Fatalf("storm: %v", err)
		}
		f.Close()
		files++
	}
	if files != stormDirs*stormFiles {
		t.Fatalf("storm saw %d files, want %d", files, stormDirs*stormFiles)
	}
	return time.Since(start)
}

func benchStorm(t *testing.T, cfg benchConfig, tbl *benchTable) []string {
	emu := startEmulator(t, nil)
	for d := range stormDirs {
		for f := range stormFiles {
			put(t, emu, fmt.Sprintf("s%02d/f%03d", d, f), []byte(fmt.Sprintf("file %d of dir %d", f, d)))
		}
	}
	const shortTTL = time.Second
	within := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", "10m"}})
	expired := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", shortTTL.String()}})
	strict := mount(t, emu, mountOpts{args: []string{"--metadata-ttl", shortTTL.String(), "--metadata-strict"}})
	mounts := []*mountProc{within, expired, strict}
	for _, m := range mounts { // warm: names known, every file cached
		for _, s := range lsLR(t, m.dir) {
			if rel, _, _ := strings.Cut(s, " "); strings.HasSuffix(s, " false") {
				readFile(t, filepath.Join(m.dir, rel))
			}
		}
	}
	wan := emulator.DefaultWAN()
	emu.SetWAN(&wan)
	defer emu.SetWAN(nil)
	var tw, te, ts []float64
	for rep := range cfg.repeat {
		tw = append(tw, storm(t, within.dir).Seconds())
		time.Sleep(shortTTL + shortTTL/2) // let the TTL of the other two run out: what is measured
		te = append(te, storm(t, expired.dir).Seconds())
		time.Sleep(shortTTL + shortTTL/2)
		ts = append(ts, storm(t, strict.dir).Seconds())
		t.Logf("repeat %d storm: within the TTL %.3fs, past it %.3fs, past it strict %.3fs", rep+1, tw[rep], te[rep], ts[rep])
	}
	w, e, s := median(tw), median(te), median(ts)
	tbl.add(benchRow{
		name:     "stat/open/readdir storm, 2,000 cached files, past the TTL (s)",
		native:   "within " + fmtSec(w),
		bucketfs: fmtSec(e),
		ratio:    fmtRatio(e / w),
		target:   "<= 2.00",
		met:      metStr(e/w <= 2),
		note:     fmt.Sprintf("--metadata-strict (the old behaviour): %s, %.1fx within the TTL", fmtSec(s), s/w),
	})
	return []string{fmt.Sprintf("storm: ls -lR then open+close of each of %d files in %d directories, behind the WAN profile (%v a response); the TTL of the 'past' mounts is %v and ran out before each storm",
		stormDirs*stormFiles, stormDirs, wan.Latency, shortTTL)}
}

func fmtSec(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// fakeListing is a names.Bucket whose directories d000/ to d099/ hold
// files f0000 to f0999: what names.db is filled from without 100,000
// objects in the emulator (whose listing scans them all).
type fakeListing struct{}

func (fakeListing) Stat(ctx context.Context, name string) (transfer.ObjectAttrs, error) {
	return transfer.ObjectAttrs{}, transfer.ErrNotExist
}

func (fakeListing) List(ctx context.Context, q transfer.ListQuery) (transfer.ListPage, error) {
	var p transfer.ListPage
	if q.Prefix == "" {
		for d := range namesDirs {
			p.Prefixes = append(p.Prefixes, fmt.Sprintf("d%03d/", d))
		}
		return p, nil
	}
	for f := range namesFiles {
		p.Objects = append(p.Objects, transfer.ObjectAttrs{Name: fmt.Sprintf("%sf%04d", q.Prefix, f), Size: 1234,
			Generation: int64(1000 + f), Metageneration: 1, Updated: time.Now(), CRC32C: uint32(f)})
	}
	return p, nil
}

type noOverlay struct{}

func (noOverlay) Local(string) (transfer.ObjectAttrs, bool)       { return transfer.ObjectAttrs{}, false }
func (noOverlay) LocalNames(string) (present, removed []string)   { return nil, nil }
func (noOverlay) LocalSubdirs(string) (present, removed []string) { return nil, nil }

// fillNamesDB writes names.db of cacheDir with 100,000 names.
func fillNamesDB(t *testing.T, cacheDir string) {
	m := fsnames.Open(fakeListing{}, noOverlay{}, fsnames.Options{TTL: time.Hour, Dir: cacheDir, Bucket: testBucket})
	defer m.Close()
	warn := func(string, string, ...any) {}
	ctx := context.Background()
	if _, err := m.List(ctx, "", warn); err != nil {
		t.Fatal(err)
	}
	for d := range namesDirs {
		if _, err := m.List(ctx, fmt.Sprintf("d%03d/", d), warn); err != nil {
			t.Fatal(err)
		}
	}
}

// rssKiB returns VmRSS of process pid in KiB.
func rssKiB(t *testing.T, pid int) float64 { return procStatusKiB(t, pid, "VmRSS") }

// readyAndRSS mounts cacheDir, and returns how long the process took to
// say it mounted, and its RSS then (MiB), and after ls -R if walk.
func readyAndRSS(t *testing.T, emu *emulator.Server, cacheDir string, walk bool) (ready time.Duration, rss, rssWalked float64) {
	start := time.Now()
	m, err := spawnMount(t, emu, mountOpts{cacheDir: cacheDir, args: []string{"--metadata-ttl", "1h"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.waitReady(); err != nil {
		t.Fatal(err)
	}
	ready = time.Since(start)
	rss = rssKiB(t, m.cmd.Process.Pid) / 1024
	if walk {
		n := 0
		err := filepath.WalkDir(m.dir, func(p string, d os.DirEntry, err error) error {
			n++
			return err
		})
		if err != nil || n != namesDirs*namesFiles+namesDirs+1 {
			t.Fatalf("ls -R of the 100,000 names: %d seen, %v", n, err)
		}
		rssWalked = rssKiB(t, m.cmd.Process.Pid) / 1024
	}
	m.unmount(t)
	return ready, rss, rssWalked
}

func benchNamesReady(t *testing.T, cfg benchConfig, tbl *benchTable) []string {
	emu := startEmulator(t, nil)
	full := t.TempDir()
	fillNamesDB(t, full)
	var rf, re, sf, se, sw []float64
	for rep := range cfg.repeat {
		empty := t.TempDir()
		d, r, _ := readyAndRSS(t, emu, empty, false)
		re, se = append(re, d.Seconds()), append(se, r)
		d, r, w := readyAndRSS(t, emu, full, rep == 0)
		rf, sf = append(rf, d.Seconds()), append(sf, r)
		if rep == 0 {
			sw = append(sw, w)
		}
		t.Logf("repeat %d mount-ready: empty cache %.3fs, 100,000 names %.3fs; RSS %.1f and %.1f MiB", rep+1, re[rep], rf[rep], se[rep], sf[rep])
	}
	ready, readyEmpty := median(rf), median(re)
	rss, rssEmpty := median(sf), median(se)
	tbl.add(benchRow{
		name:     "mount-ready, 100,000 names in names.db (s)",
		native:   "empty " + fmtSec(readyEmpty),
		bucketfs: fmtSec(ready),
		ratio:    fmtRatio(ready / readyEmpty),
		target:   "< 1s",
		met:      metStr(ready < 1),
		note:     "from the start of the process to its 'mounted' line",
	})
	tbl.add(benchRow{
		name:     "RSS of bucketfs, 100,000 names in names.db (MiB)",
		native:   "empty " + fmtNum(rssEmpty),
		bucketfs: fmtNum(rss),
		ratio:    fmtRatio(rss / rssEmpty),
		target:   "< 150 MiB",
		met:      metStr(rss < 150),
		note: fmt.Sprintf("at mount-ready; %s MiB after ls -R of all 100,000 (every directory loaded, and a kernel inode per name: READDIRPLUS looks each one up)",
			fmtNum(sw[0])),
	})
	return nil
}
