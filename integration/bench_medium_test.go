package integration

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// The medium section (issue 37): objects of 8 MiB, one cache chunk each,
// read cold behind the WAN profile. Four fio jobs read 16 objects each
// (1 MiB O_DIRECT reads, libaio at depth 64, the files in a shuffled
// order and picked at random between I/Os), the shape of the leading
// peer's read-cache load test; and one object read whole by one reader.
// Each run is on a fresh mount, over TLS as GCS serves it, with the
// default flags, and with --prefetch-min-range 8MiB (one request per
// chunk: how an 8 MiB object was fetched before), interleaved. The
// native column is the same fio job on the same files in a directory on
// local disk.

const (
	mediumObjects = 64
	mediumSize    = 8 << 20
	mediumJobs    = 4
)

func mediumName(i int) string { return fmt.Sprintf("medium/m%02d", i) }

func benchMedium(t *testing.T, emu *emulator.Server, fioPath string, cfg benchConfig, tbl *benchTable) []string {
	t.Helper()
	native := t.TempDir()
	if err := os.MkdirAll(filepath.Join(native, "medium"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range mediumObjects {
		data := testutil.RandomBytes(mediumSize, uint64(300+i))
		put(t, emu, mediumName(i), data)
		writeSynced(t, filepath.Join(native, mediumName(i)), data)
	}
	wan := emulator.DefaultWAN()
	capMiB := float64(wan.Total) / (1 << 20)
	settings := []struct {
		label string
		args  []string
	}{
		{"default (8 requests of 1 MiB an object)", nil},
		{"--prefetch-min-range 8MiB (one request a chunk, as before)", []string{"--prefetch-min-range", "8MiB"}},
	}
	nativeMiB := mediumFio(t, fioPath, native).fio
	fioMiB := make([][]float64, len(settings))
	wallMiB := make([][]float64, len(settings))
	catSecs := make([][]float64, len(settings))
	emu.SetWAN(&wan)
	defer emu.SetWAN(nil)
	for rep := range cfg.repeat {
		for i, s := range settings {
			m := mount(t, emu, mountOpts{tls: true, args: s.args})
			v := mediumFio(t, fioPath, m.dir)
			m.unmount(t)
			m = mount(t, emu, mountOpts{tls: true, args: s.args})
			start := time.Now()
			name := mediumName(rep % mediumObjects)
			data, err := os.ReadFile(m.path(name))
			secs := time.Since(start).Seconds()
			m.unmount(t)
			if err != nil || len(data) != mediumSize {
				t.Fatalf("cold read of %s: %d bytes, %v", name, len(data), err)
			}
			t.Logf("repeat %d %s: fio %.0f MiB/s (%.0f over the wall time), one cold read %.3f s", rep+1, s.label, v.fio, v.wall, secs)
			fioMiB[i], wallMiB[i], catSecs[i] = append(fioMiB[i], v.fio), append(wallMiB[i], v.wall), append(catSecs[i], secs)
		}
	}
	for i, s := range settings {
		v := median(fioMiB[i])
		row := benchRow{
			name:     fmt.Sprintf("medium: %d readers of %d cold 8 MiB objects (MiB/s), WAN, TLS, %s", mediumJobs, mediumObjects, s.label),
			native:   fmtNum(nativeMiB) + " (cap " + fmtNum(capMiB) + ")",
			bucketfs: fmtNum(v),
			ratio:    fmtRatio(v/capMiB) + " of cap",
			target:   "-",
			met:      "-",
			note: fmt.Sprintf("medians of %d, each on a fresh mount; as fio reports it; %s MiB/s over fio's wall time, its setup's lookups of the 64 names included",
				cfg.repeat, fmtNum(median(wallMiB[i]))),
		}
		cat := benchRow{
			name: "medium: one cold 8 MiB read (s), WAN, TLS, " + s.label, native: "-", bucketfs: fmtSec(median(catSecs[i])), ratio: "-",
			target: "-", met: "-", note: "open, read whole and close on a fresh mount",
		}
		if i == 0 {
			row.target, row.met = ">= 0.80 of cap", metStr(v/capMiB >= 0.80)
			cat.target, cat.met = "<= 0.2 s", metStr(median(catSecs[i]) <= 0.2)
		}
		tbl.add(row)
		tbl.add(cat)
	}
	return []string{"medium: 64 objects of 8 MiB read by 4 fio jobs of 16 files each (--rw=read --bs=1M --direct=1 --ioengine=libaio --iodepth=64 --file_service_type=random); MiB/s is the jobs' bandwidths as fio reports them (opens and reads; fio's setup looks each name up first, one after another)"}
}

// mediumResult is one run of the medium fio jobs: MiB/s as fio reports
// it (the jobs' bandwidths summed, each over its runtime: the opens and
// reads, not fio's setup, which looks every file up first), and over
// the wall time of the whole command.
type mediumResult struct{ fio, wall float64 }

// mediumFio runs the medium fio jobs on the objects under dir.
func mediumFio(t *testing.T, fioPath, dir string) mediumResult {
	t.Helper()
	order := rand.New(rand.NewSource(37)).Perm(mediumObjects)
	args := []string{"--readonly", "--direct=1", "--ioengine=libaio", "--iodepth=64", "--rw=read", "--bs=1M",
		"--file_service_type=random", "--output-format=json"}
	per := mediumObjects / mediumJobs
	for j := range mediumJobs {
		var files []string
		for _, i := range order[j*per : (j+1)*per] {
			files = append(files, filepath.Join(dir, mediumName(i)))
		}
		args = append(args, fmt.Sprintf("--name=medium%d", j), "--filename="+strings.Join(files, ":"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, fioPath, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	d := time.Since(start)
	if err != nil {
		t.Fatalf("fio on %s: %v\nstderr: %s", dir, err, stderr.String())
	}
	n, bw, err := parseFioAll(out)
	if err != nil {
		t.Fatalf("fio on %s: %v\nstdout: %s", dir, err, out)
	}
	if want := int64(mediumObjects * mediumSize); n != want {
		t.Fatalf("fio on %s read %d bytes, want %d", dir, n, want)
	}
	return mediumResult{fio: bw / (1 << 20), wall: mibps(n, d)}
}
