package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
)

// benchSaves is the saves section (run with small-files too): the
// careful save of editors and databases, one file after another: write a temporary
// file, fsync it, rename it over its name, fsync the directory. Each
// fsync of bucketfs (the default --fsync local) syncs the cache file,
// the cache's data directory if a cache file was made since, and the
// journal; the loopback mount's syncs the file and the directory on the
// same disk. Loopback before and after bucketfs, averaged, as in the
// create row; BENCH_REPEAT runs, medians.
func benchSaves(t *testing.T, cfg benchConfig, tbl *benchTable) []string {
	t.Helper()
	n := min(cfg.smallFiles, 500)
	emu := startEmulator(t, nil)
	contents := testutil.RandomBytes(n*smallFileSize, 700)
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", benchWriteBackDelay}})
	loopback := func(dir string) time.Duration {
		lm := mountLoopback(t, t.TempDir())
		d := saveFiles(t, filepath.Join(lm.dir, dir), n, contents)
		lm.unmount(t)
		return d
	}
	var bfRates, lbRates, ratios []float64
	for i := range cfg.repeat {
		lb1 := loopback(fmt.Sprintf("saves-%d-a", i))
		bf := saveFiles(t, m.path(fmt.Sprintf("saves-%d", i)), n, contents)
		lb2 := loopback(fmt.Sprintf("saves-%d-b", i))
		bfRate, lbRate := float64(n)/bf.Seconds(), float64(2*n)/(lb1+lb2).Seconds()
		bfRates, lbRates, ratios = append(bfRates, bfRate), append(lbRates, lbRate), append(ratios, bfRate/lbRate)
		t.Logf("run %d: saved %d x 4 KiB files (write, fsync, rename, fsync the directory): bucketfs %.0f files/s, loopback %.0f then %.0f files/s",
			i+1, n, bfRate, float64(n)/lb1.Seconds(), float64(n)/lb2.Seconds())
	}
	m.unmount(t)
	tbl.add(benchRow{
		name:     fmt.Sprintf("save %d x 4 KiB files with fsync (files/s)", n),
		native:   "loopback " + fmtNum(median(lbRates)),
		bucketfs: fmtNum(median(bfRates)),
		ratio:    fmtRatio(median(ratios)),
		target:   "-",
		met:      "-",
		note:     fmt.Sprintf("ratio: bucketfs / loopback; no WAN; --fsync local; medians of %d runs", len(ratios)),
	})
	return []string{"save row: per file, write a temporary file, fsync it, rename it over its name, fsync the directory (the atomic-save pattern); " +
		"loopback before and after bucketfs, averaged"}
}

// saveFiles saves n files in new directory dir the careful way and
// returns how long it took.
func saveFiles(t *testing.T, dir string, n int, contents []byte) time.Duration {
	t.Helper()
	return timedLoop(t, fmt.Sprintf("saving %d files in %s", n, dir), func() (time.Duration, error) {
		return saveLoop(dir, n, contents)
	})
}

func saveLoop(dir string, n int, contents []byte) (time.Duration, error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return 0, err
	}
	d, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	start := time.Now()
	for i := range n {
		tmp := filepath.Join(dir, ".tmp-"+smallName(i))
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return 0, err
		}
		_, err = f.Write(smallContent(contents, i))
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, filepath.Join(dir, smallName(i)))
		}
		if err == nil {
			err = d.Sync()
		}
		if err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}
