package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// The warm section of 'make bench' (BENCH_ONLY=warm): 'bucketfs warm' of
// the tree of issue 14 (2,000 objects of 16 KiB in 20 directories) and
// two objects of 64 MiB, behind emulator.DefaultWAN(), against the raw
// limit measured in the same run: the same objects fetched by a Go loop
// with 128 requests in flight through the same profile (plain HTTP
// range GETs of at most warmRawChunk, the big objects' first; bucketfs
// fetches them in ranges of its chunk size too). Each repeat warms a
// fresh mount with the default --max-requests (64) and with 128; then
// warms again (everything is there), and reads every file through the
// mount, counting requests, against the same files read from a native
// directory.

const (
	warmDirs      = 20
	warmPerDir    = 100
	warmSmall     = 16 << 10
	warmBig       = 64 << 20
	warmBigCount  = 2
	warmRawChunk  = 8 << 20 // bucketfs's default --prefetch-chunk-size
	warmRawFlight = 128
	warmTarget    = 8 * time.Second
)

// warmObj is one object of the warm tree.
type warmObj struct {
	name string
	data []byte
}

func warmTree() []warmObj {
	var objs []warmObj
	for i := range warmBigCount {
		objs = append(objs, warmObj{fmt.Sprintf("warm/big/b%d", i), testutil.RandomBytes(warmBig, uint64(900+i))})
	}
	for d := range warmDirs {
		for f := range warmPerDir {
			objs = append(objs, warmObj{fmt.Sprintf("warm/d%02d/f%03d", d, f), testutil.RandomBytes(warmSmall, uint64(1000+d*warmPerDir+f))})
		}
	}
	return objs
}

// benchWarm is the warm section.
func benchWarm(t *testing.T, cfg benchConfig, tbl *benchTable) []string {
	t.Helper()
	emu := startEmulator(t, nil)
	objs := warmTree()
	native := t.TempDir()
	var total int64
	for _, o := range objs {
		put(t, emu, o.name, o.data)
		p := filepath.Join(native, o.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, o.data, 0o644); err != nil {
			t.Fatal(err)
		}
		total += int64(len(o.data))
	}
	wan := emulator.DefaultWAN()
	emu.SetWAN(&wan)
	defer emu.SetWAN(nil)

	pars := []string{"64", "128"}
	var raws []float64
	warms := map[string][]float64{}
	var again, bfRead, natRead, reqs []float64
	cpuMS := map[string][]float64{} // bucketfs's CPU per object warmed, ms
	var emuCPU []float64            // the test process's (the emulator's) CPU during a warm, s
	for rep := range cfg.repeat {
		raws = append(raws, rawFetch(t, emu, objs, warmRawFlight).Seconds())
		for _, par := range pars {
			m := mount(t, emu, mountOpts{args: []string{"--cache-max-size", "1GiB", "--max-requests", par}})
			cpu0, self0 := procCPU(m.cmd.Process.Pid), selfCPU()
			start := time.Now()
			code, w, out := warm(t, m.path("warm"))
			d := time.Since(start)
			cpuMS[par] = append(cpuMS[par], (procCPU(m.cmd.Process.Pid)-cpu0).Seconds()*1000/float64(len(objs)))
			emuCPU = append(emuCPU, (selfCPU() - self0).Seconds())
			if code != 0 || w.Files != len(objs) || w.Failed != 0 || w.TotalBytes != total {
				t.Fatalf("warm exited %d with %+v, want %d files, %d bytes:\n%s", code, w, len(objs), total, out)
			}
			warms[par] = append(warms[par], d.Seconds())
			t.Logf("repeat %d: warm with --max-requests %s: %v, bucketfs CPU %.2f ms an object, test process (emulator) CPU %.1fs",
				rep+1, par, d.Round(time.Millisecond), cpuMS[par][len(cpuMS[par])-1], emuCPU[len(emuCPU)-1])
			if par != pars[len(pars)-1] {
				m.unmount(t)
				continue
			}
			start = time.Now()
			code, w, out = warm(t, m.path("warm"))
			if code != 0 || w.AlreadyFiles != len(objs) {
				t.Fatalf("second warm exited %d with %+v, want all %d there:\n%s", code, w, len(objs), out)
			}
			again = append(again, time.Since(start).Seconds())
			emu.ResetCounters()
			bfRead = append(bfRead, mibps(total, readWarmTree(t, m.dir, objs)))
			reqs = append(reqs, float64(emu.Requests()))
			natRead = append(natRead, mibps(total, readWarmTree(t, native, objs)))
			m.unmount(t)
		}
	}
	raw := median(raws)
	for _, par := range pars {
		w := median(warms[par])
		tbl.add(benchRow{
			name:     fmt.Sprintf("warm %d x 16 KiB + %d x 64 MiB, WAN (s), --max-requests %s", warmDirs*warmPerDir, warmBigCount, par),
			native:   "raw " + fmtNum(raw),
			bucketfs: fmtNum(w),
			ratio:    fmtRatio(raw / w),
			target:   fmt.Sprintf("<= %v", warmTarget),
			met:      metStr(w <= warmTarget.Seconds()),
			note: fmt.Sprintf("%.0f MiB; ratio = raw time / warm time; includes the command's walk of the tree; bucketfs CPU %.2f ms an object",
				float64(total)/(1<<20), median(cpuMS[par])),
		})
	}
	tbl.add(benchRow{
		name: "warm again, all cached (s)", native: "-", bucketfs: fmtNum(median(again)), ratio: "-", target: "-", met: "-",
		note: "lists the bucket, fetches nothing",
	})
	tbl.add(benchRow{
		name:     "read everything after warm (MiB/s)",
		native:   fmtNum(median(natRead)),
		bucketfs: fmtNum(median(bfRead)),
		ratio:    fmtRatio(median(bfRead) / median(natRead)),
		target:   "0 requests",
		met:      metStr(median(reqs) == 0),
		note:     fmt.Sprintf("%.0f bucket requests during the reads; one goroutine, files in order; native = the same tree in a directory (page cache warm)", median(reqs)),
	})
	t.Logf("emulator (test process) CPU during the warms: median %.1fs", median(emuCPU))
	return []string{
		fmt.Sprintf("warm rows: 'bucketfs warm --json MOUNT/warm' on a fresh mount (--cache-max-size 1GiB) behind the WAN profile (%v per request, %d MiB/s per connection, %d MiB/s in total); "+
			"raw = the same objects fetched by a Go loop of plain HTTP range GETs (at most %d MiB each), %d in flight, in the same run",
			wan.Latency, wan.PerConn>>20, wan.Total>>20, warmRawChunk>>20, warmRawFlight),
	}
}

// rawFetch fetches every object with range GETs of at most warmRawChunk,
// flight at a time, the biggest first, and returns how long it took.
func rawFetch(t *testing.T, emu *emulator.Server, objs []warmObj, flight int) time.Duration {
	t.Helper()
	type job struct {
		o        warmObj
		off, len int64
	}
	var jobs []job
	for _, o := range objs {
		for off := int64(0); off < int64(len(o.data)); off += warmRawChunk {
			jobs = append(jobs, job{o, off, min(warmRawChunk, int64(len(o.data))-off)})
		}
	}
	sort.SliceStable(jobs, func(i, j int) bool { return len(jobs[i].o.data) > len(jobs[j].o.data) })
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: flight}}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ch := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	start := time.Now()
	for range flight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				if err := rawGet(ctx, hc, emu.URL(), j.o, j.off, j.len); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	d := time.Since(start)
	if failed != nil {
		t.Fatalf("raw fetch: %v", failed)
	}
	return d
}

// rawGet fetches [off, off+n) of o and checks its bytes.
func rawGet(ctx context.Context, hc *http.Client, base string, o warmObj, off, n int64) error {
	u := base + "/download/storage/v1/b/" + testBucket + "/o/" + url.PathEscape(o.name) + "?alt=media"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-"+strconv.FormatInt(off+n-1, 10))
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 || !bytes.Equal(got, o.data[off:off+n]) {
		return fmt.Errorf("%s [%d, %d): status %d, %d bytes that differ from the object's", o.name, off, off+n, resp.StatusCode, len(got))
	}
	return nil
}

// readWarmTree reads every object's file under root in order, checks its
// bytes, and returns how long it took.
func readWarmTree(t *testing.T, root string, objs []warmObj) time.Duration {
	t.Helper()
	start := time.Now()
	for _, o := range objs {
		got, err := os.ReadFile(filepath.Join(root, o.name))
		if err != nil || !bytes.Equal(got, o.data) {
			t.Fatalf("reading %s under %s: %v (%d bytes; differ from the object's)", o.name, root, err, len(got))
		}
	}
	return time.Since(start)
}
