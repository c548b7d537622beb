package integration

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/bucketfs/bucketfs/internal/emulator"
)

// The small-read section (issue 14): a cold `cat d*/f*` over 20
// directories of 100 files of 16 KiB behind the WAN profile, through
// bucketfs with the default metadata TTL, with the TTL lapsed, and with
// prefetch off; against the same tree in a native directory and against
// the raw limit: the same objects fetched by a Go loop with 128 requests
// in flight through the same WAN profile.

const (
	smallReadDirs  = 20
	smallReadFiles = 100
	smallReadSize  = 16 << 10
	smallReadNoPf  = 2 // directories read with prefetch off (it is slow)
)

// smallReadRun is one timed cat.
type smallReadRun struct {
	d       time.Duration
	files   int
	read    int64   // bytes cat read
	fetched float64 // bytes bucketfs downloaded (its metrics)
	reqs    int64   // requests the emulator saw during the cat
}

func benchSmallReads(t *testing.T, cfg benchConfig, tbl *benchTable) []string {
	t.Helper()
	emu := startEmulator(t, nil)
	tree := putTree(t, emu, smallReadDirs, smallReadFiles, smallReadSize)
	names := make([]string, 0, len(tree))
	for n := range tree {
		names = append(names, n)
	}
	slices.Sort(names)

	native := t.TempDir()
	for _, n := range names {
		p := filepath.Join(native, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		writeSynced(t, p, tree[n])
	}
	wan := emulator.DefaultWAN()
	emu.SetWAN(&wan)
	defer emu.SetWAN(nil)

	nat := timedCat(t, native, "d*/f*", catSum(tree, names))
	raw := rawFetchWhole(t, emu, names)
	def := smallReadMount(t, emu, tree, names, "d*/f*", false, nil)
	lapsed := smallReadMount(t, emu, tree, names, "d*/f*", true, []string{"--metadata-ttl", "2s"})
	sub := fmt.Sprintf("d0[0-%d]/f*", smallReadNoPf-1)
	off := smallReadMount(t, emu, tree, names, sub, false, []string{"--prefetch=false"})
	// Issue 23: the cold mount over the emulator's TLS listener, with
	// each --client-protocol (tlsArgs' --endpoint wins over the plain one).
	overTLS := smallReadMount(t, emu, tree, names, "d*/f*", false, tlsArgs(t, emu))
	overH2 := smallReadMount(t, emu, tree, names, "d*/f*", false, append(tlsArgs(t, emu), "--client-protocol", "http2"))

	row := func(name string, r smallReadRun, target time.Duration) {
		scaled := r.d * time.Duration(len(names)) / time.Duration(r.files)
		note := fmt.Sprintf("%d files; fetched %.2f MiB for %.2f MiB read (%+.1f%%); %d requests; raw limit %.2fs (%.2fx of it)",
			r.files, r.fetched/(1<<20), float64(r.read)/(1<<20), 100*(r.fetched/float64(r.read)-1), r.reqs,
			raw.Seconds(), scaled.Seconds()/raw.Seconds())
		if r.files != len(names) {
			note += fmt.Sprintf("; %.1fs scaled to %d files", scaled.Seconds(), len(names))
		}
		met := "-"
		if target > 0 {
			met = metStr(r.d <= target && r.fetched <= 1.1*float64(r.read))
		}
		tbl.add(benchRow{name: name, native: fmtNum(nat.Seconds()) + "s", bucketfs: fmtNum(r.d.Seconds()) + "s",
			ratio: fmtRatio(r.d.Seconds() / nat.Seconds()), target: targetStr(target), met: met, note: note})
	}
	row("small-read cat, TTL 1m (cold mount)", def, 10*time.Second)
	row("small-read cat, TTL lapsed (after ls -lR)", lapsed, 10*time.Second)
	row("small-read cat, --prefetch=false", off, 0)
	for _, v := range []struct {
		label string
		r     smallReadRun
	}{{"TLS http1 (default)", overTLS}, {"TLS http2", overH2}} {
		row("small-read cat, TTL 1m (cold mount), "+v.label, v.r, 0)
		last := &tbl.rows[len(tbl.rows)-1]
		x := v.r.d.Seconds() / def.d.Seconds()
		last.note = fmt.Sprintf("%.2fx the plain HTTP cold mount's time; ", x) + last.note
		last.target, last.met = "<= 1.10x plain", metStr(x <= 1.10)
	}
	return []string{fmt.Sprintf("small-read: %d dirs x %d files x %s under the WAN profile (%v per request, %s/s per connection, %s/s in total); native is the same tree in a local directory (page cache warm); ratio = bucketfs/native time",
		smallReadDirs, smallReadFiles, sizeLabel(smallReadSize), wan.Latency, sizeLabel(wan.PerConn), sizeLabel(wan.Total))}
}

func targetStr(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("<=%v, <=+10%% bytes", d)
}

// catSum is the SHA-256 of the files of names in order, as cat prints
// them.
func catSum(tree map[string][]byte, names []string) string {
	h := sha256.New()
	for _, n := range names {
		h.Write(tree[n])
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// timedCat runs `cat GLOB` in dir through sh, checks what it printed
// against want (if set), and returns how long it took.
func timedCat(t *testing.T, dir, glob, want string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", "cat "+glob)
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	_, cerr := io.Copy(h, out)
	werr := cmd.Wait()
	d := time.Since(start)
	if cerr != nil || werr != nil {
		t.Fatalf("cat %s in %s: %v %v", glob, dir, cerr, werr)
	}
	if got := fmt.Sprintf("%x", h.Sum(nil)); want != "" && got != want {
		t.Fatalf("cat %s in %s: wrong bytes", glob, dir)
	}
	return d
}

// smallReadMount mounts a new cache, optionally lists the tree and lets
// the metadata TTL (2s) lapse, then times cat GLOB.
func smallReadMount(t *testing.T, emu *emulator.Server, tree map[string][]byte, names []string, glob string, lapse bool, args []string) smallReadRun {
	t.Helper()
	m := mount(t, emu, mountOpts{args: append([]string{"--metrics-addr", "127.0.0.1:0"}, args...)})
	defer m.unmount(t)
	url := m.metricsURL(t)
	if lapse {
		ls := exec.Command("ls", "-lR", m.dir)
		ls.Stdout = io.Discard
		if err := ls.Run(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // the bench's case: the TTL has lapsed
	}
	matched, err := filepath.Glob(filepath.Join(m.dir, glob))
	if err != nil {
		t.Fatal(err)
	}
	sel := names[:len(matched)] // the globs take a prefix of the sorted names
	const readBytes = `bucketfs_bucket_bytes_total{method="read"}`
	before := scrape(t, url)[readBytes]
	emu.ResetCounters()
	d := timedCat(t, m.dir, glob, catSum(tree, sel))
	r := smallReadRun{d: d, files: len(sel), read: int64(len(sel) * smallReadSize), reqs: emu.Requests()}
	r.fetched = scrape(t, url)[readBytes] - before
	st := m.status(t)
	t.Logf("small-read %v: %v, %d files, prefetch used %d wasted %d bytes, hits %d misses %d",
		args, d, len(sel), st.PrefetchUsedBytes, st.PrefetchWastedBytes, st.Hits, st.Misses)
	return r
}

// rawFetch fetches every object of names with 128 requests in flight
// through the official client and returns how long it took.
func rawFetchWhole(t *testing.T, emu *emulator.Server, names []string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	client, err := storage.NewClient(ctx, emu.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	work := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for range 128 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				r, err := client.Bucket(testBucket).Object(n).NewReader(ctx)
				if err == nil {
					_, err = io.Copy(io.Discard, r)
					r.Close()
				}
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}
		}()
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("raw fetch: %v", firstErr)
	}
	return time.Since(start)
}
