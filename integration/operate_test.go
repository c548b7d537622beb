package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/control"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// metricsURL waits for the mount to log where it serves metrics.
func (m *mountProc) metricsURL(t *testing.T) string {
	t.Helper()
	m.logs.waitFor(t, `msg="serving metrics"`, 30*time.Second)
	match := regexp.MustCompile(`msg="serving metrics" addr=(\S+)`).FindStringSubmatch(m.logs.String())
	if match == nil {
		t.Fatalf("no metrics address in the log:\n%s", m.logs.String())
	}
	return "http://" + match[1] + "/metrics"
}

// scrape fetches url and returns its samples: "name{labels}" -> value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping %s: %s, %v", url, resp.Status, err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

// need returns the sample name, failing the test if it is missing.
func need(t *testing.T, samples map[string]float64, name string) float64 {
	t.Helper()
	v, ok := samples[name]
	if !ok {
		t.Fatalf("series %s missing from the scrape", name)
	}
	return v
}

// status runs 'bucketfs status --json' on the mount.
func (m *mountProc) status(t *testing.T) control.Status {
	t.Helper()
	code, out := runBucketfs(t, nil, "status", m.dir, "--json")
	if code != 0 {
		t.Fatalf("bucketfs status exited %d:\n%s", code, out)
	}
	var st control.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("bucketfs status --json: %v\n%s", err, out)
	}
	return st
}

// TestMetricsMove scrapes a live mount before and after reading and
// writing files through it, and checks that the series are there and
// move as they should.
func TestMetricsMove(t *testing.T) {
	emu := startEmulator(t, nil)
	data := testutil.RandomBytes(300_000, 7)
	put(t, emu, "in/data.bin", data)
	// The first media read of the object fails once with 503: the client
	// retries it, and the retry is counted.
	var failed atomic.Bool
	emu.SetHook(func(r *http.Request) (int, bool) {
		if r.Method == http.MethodGet && r.URL.Query().Get("alt") == "media" && failed.CompareAndSwap(false, true) {
			return http.StatusServiceUnavailable, true
		}
		return 0, false
	})
	m := mount(t, emu, mountOpts{args: []string{"--metrics-addr", "127.0.0.1:0", "--write-back-delay", "1h"}})
	url := m.metricsURL(t)
	before := scrape(t, url)
	for _, name := range []string{
		`bucketfs_build_info{version="dev"}`,
		`bucketfs_bucket_requests_total{method="read"}`,
		`bucketfs_bucket_retries_total{method="read"}`,
		`bucketfs_cache_capacity_bytes`,
		`bucketfs_cache_used_bytes`,
		`bucketfs_dirty_files`,
		`bucketfs_dirty_oldest_age_seconds`,
		`bucketfs_upload_queue_length`,
		`bucketfs_uploads_in_flight`,
		`bucketfs_conflicts_total`,
		`bucketfs_cache_evictions_total`,
		`go_goroutines`,
	} {
		need(t, before, name)
	}
	if before[`bucketfs_dirty_files`] != 0 {
		t.Errorf("dirty files %v on a fresh mount", before[`bucketfs_dirty_files`])
	}

	if got := readFile(t, m.path("in/data.bin")); !bytes.Equal(got, data) {
		t.Fatal("read through the mount differs from the object")
	}
	// A second open of the now complete copy is a hit.
	if got := readFile(t, m.path("in/data.bin")); !bytes.Equal(got, data) {
		t.Fatal("second read differs")
	}
	newData := testutil.RandomBytes(50_000, 8)
	if err := os.WriteFile(m.path("out-1.bin"), newData, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.path("out-2.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Renaming a directory over a non-empty one fails: a FUSE error.
	for _, d := range []string{"d1", "d2/inner"} {
		if err := os.MkdirAll(m.path(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// (Not os.Rename: it refuses a directory target itself, with no
	// request.)
	if err := syscall.Rename(m.path("d1"), m.path("d2")); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("renaming a directory over a non-empty one: %v, want ENOTEMPTY; this test needs a FUSE request that fails", err)
	}

	after := scrape(t, url)
	grew := func(name string, by float64) {
		t.Helper()
		if d := need(t, after, name) - before[name]; d < by {
			t.Errorf("%s grew by %v, want at least %v", name, d, by)
		}
	}
	grew(`bucketfs_fuse_requests_total{op="read"}`, 1)
	// Writes go through FUSE passthrough here: the kernel writes the
	// cache file itself and the daemon sees no write request.
	grew(`bucketfs_fuse_requests_total{op="create"}`, 2)
	grew(`bucketfs_fuse_requests_total{op="lookup"}`, 1)
	grew(`bucketfs_fuse_request_duration_seconds_count{op="read"}`, 1)
	grew(`bucketfs_fuse_requests_total{op="mkdir"}`, 1)
	grew(`bucketfs_fuse_requests_total{op="rename"}`, 1)
	renameErrors := 0.0
	for name, v := range after {
		if strings.HasPrefix(name, `bucketfs_fuse_errors_total{`) && strings.Contains(name, `op="rename"`) {
			renameErrors += v
		}
	}
	if renameErrors != 1 {
		t.Errorf("fuse errors of rename: %v, want 1", renameErrors)
	}
	grew(`bucketfs_bucket_requests_total{method="read"}`, 1)
	grew(`bucketfs_bucket_bytes_total{method="read"}`, float64(len(data)))
	grew(`bucketfs_bucket_retries_total{method="read"}`, 1)
	grew(`bucketfs_bucket_request_duration_seconds_count{method="read"}`, 1)
	grew(`bucketfs_cache_misses_total`, 1)
	grew(`bucketfs_cache_hits_total`, 1)
	grew(`bucketfs_cache_used_bytes`, float64(len(data)))
	if got := after[`bucketfs_dirty_files`]; got != 5 {
		t.Errorf("dirty files %v after writing 2 files and 3 directories (uploads wait an hour)", got)
	}
	if got := after[`bucketfs_dirty_bytes`]; got != float64(len(newData)+5) {
		t.Errorf("dirty bytes %v, want %d", got, len(newData)+5)
	}
	if got := after[`bucketfs_upload_queue_length`]; got != 5 {
		t.Errorf("upload queue %v, want 5", got)
	}
	if got := after[`bucketfs_dirty_oldest_age_seconds`]; got <= 0 {
		t.Errorf("oldest dirty age %v, want > 0", got)
	}

	// Flush over the control socket, then the uploads show.
	if code, out := runBucketfs(t, nil, "flush", m.dir); code != 0 {
		t.Fatalf("bucketfs flush exited %d:\n%s", code, out)
	}
	final := scrape(t, url)
	if d := final[`bucketfs_uploads_total`] - after[`bucketfs_uploads_total`]; d != 5 {
		t.Errorf("uploads_total grew by %v, want 5", d)
	}
	if d := final[`bucketfs_bucket_bytes_total{method="put"}`] - after[`bucketfs_bucket_bytes_total{method="put"}`]; d != float64(len(newData)+5) {
		t.Errorf("put bytes grew by %v, want %d", d, len(newData)+5)
	}
	if final[`bucketfs_dirty_files`] != 0 || final[`bucketfs_dirty_oldest_age_seconds`] != 0 || final[`bucketfs_upload_queue_length`] != 0 {
		t.Errorf("after flush: dirty files %v, oldest age %v, queue %v; want 0",
			final[`bucketfs_dirty_files`], final[`bucketfs_dirty_oldest_age_seconds`], final[`bucketfs_upload_queue_length`])
	}
	m.unmount(t)
}

// TestStatusAndFlush drives 'bucketfs status' and 'bucketfs flush'
// against a live mount: flush returns once the files are in the
// emulator's bucket; a flush that cannot finish exits 1 naming the file
// and leaves the mount running.
func TestStatusAndFlush(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "1h"}})
	files := map[string][]byte{
		"a.txt":     []byte("alpha"),
		"dir/b.bin": testutil.RandomBytes(200_000, 3),
	}
	if err := os.Mkdir(m.path("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(m.path(name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	st := m.status(t)
	if st.Bucket != testBucket || st.Mountpoint != m.dir || st.PID != m.cmd.Process.Pid {
		t.Errorf("status names bucket %q, mountpoint %q, pid %d; want %q, %q, %d", st.Bucket, st.Mountpoint, st.PID, testBucket, m.dir, m.cmd.Process.Pid)
	}
	// The directory's placeholder is a change too.
	var names []string
	for _, d := range st.Dirty {
		names = append(names, d.Name)
	}
	if st.DirtyFiles != 3 || st.DirtyBytes != int64(len(files["a.txt"])+len(files["dir/b.bin"])) || st.Queued != 3 || len(st.Dirty) != 3 {
		t.Errorf("status: %d dirty files (%d bytes), %d queued, listed %v; want dir/, a.txt and dir/b.bin",
			st.DirtyFiles, st.DirtyBytes, st.Queued, names)
	}
	code, text := runBucketfs(t, nil, "status", m.dir)
	if code != 0 || !strings.Contains(text, "3 files") || !strings.Contains(text, "dir/b.bin") {
		t.Errorf("bucketfs status exited %d:\n%s", code, text)
	}
	for name := range files {
		if object(t, emu, name) != nil {
			t.Fatalf("%s is in the bucket before the flush (write-back delay 1h)", name)
		}
	}

	code, out := runBucketfs(t, nil, "flush", m.dir)
	if code != 0 || !strings.Contains(out, "flushed") {
		t.Fatalf("bucketfs flush exited %d:\n%s", code, out)
	}
	for name, data := range files {
		if got := object(t, emu, name); !bytes.Equal(got, data) {
			t.Errorf("%s in the bucket after flush: %d bytes, want %d", name, len(got), len(data))
		}
	}
	if st := m.status(t); st.DirtyFiles != 0 || st.Uploads != 3 {
		t.Errorf("after flush: %d dirty, %d uploads; want 0 and 3", st.DirtyFiles, st.Uploads)
	}

	// The bucket refuses uploads: flush gives up at its timeout, names
	// the file, and the mount goes on.
	emu.SetHook(func(r *http.Request) (int, bool) { return http.StatusForbidden, isUploadReq(r) })
	if err := os.WriteFile(m.path("refused.txt"), []byte("no"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = runBucketfs(t, nil, "flush", m.dir, "--timeout", "3s")
	if code != 1 || !strings.Contains(out, "refused.txt") {
		t.Errorf("flush against a refusing bucket exited %d, want 1 naming refused.txt:\n%s", code, out)
	}
	if got := readFile(t, m.path("a.txt")); string(got) != "alpha" {
		t.Errorf("the mount after a failed flush reads a.txt as %q", got)
	}
	st = m.status(t)
	if len(st.Errors) == 0 || st.Errors[len(st.Errors)-1].Object != "refused.txt" || st.UploadFailures == 0 {
		t.Errorf("status after refused uploads: errors %+v, %d failures; want refused.txt named", st.Errors, st.UploadFailures)
	}
	code, text = runBucketfs(t, nil, "status", m.dir)
	if code != 0 || !strings.Contains(text, "recent errors") || !strings.Contains(text, "REFUSED") || !strings.Contains(text, "refused.txt") {
		t.Errorf("bucketfs status after refused uploads exited %d:\n%s", code, text)
	}
	// Without a timeout too, flush returns naming the refused file
	// (issue 22, item 3): before, it waited for ever.
	code, out = runBucketfs(t, nil, "flush", m.dir)
	if code != 1 || !strings.Contains(out, "refused.txt") {
		t.Errorf("flush with no timeout against a refusing bucket exited %d, want 1 naming refused.txt:\n%s", code, out)
	}
	emu.SetHook(nil)
	if code, out := runBucketfs(t, nil, "flush", m.dir); code != 0 {
		t.Fatalf("flush after the bucket came back exited %d:\n%s", code, out)
	}
	if got := object(t, emu, "refused.txt"); string(got) != "no" {
		t.Errorf("refused.txt in the bucket: %q", got)
	}

	// --cache-dir reaches the same socket.
	code, out = runBucketfs(t, nil, "status", "--cache-dir", m.cacheDir, "--json")
	if code != 0 || !strings.Contains(out, `"mountpoint": "`+m.dir+`"`) {
		t.Errorf("status --cache-dir exited %d:\n%s", code, out)
	}

	sock := filepath.Join(m.cacheDir, control.SocketName)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("control socket: %v, %v; want mode 0600", fi, err)
	}
	m.unmount(t)
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("control socket left after unmount: %v", err)
	}
	code, out = runBucketfs(t, nil, "status", m.dir)
	if code != 1 || !strings.Contains(out, "nothing is mounted on "+m.dir) {
		t.Errorf("status of an unmounted directory exited %d:\n%s", code, out)
	}
}

// TestStatusNotBucketfs: status on a directory where nothing or something
// else is mounted says so.
func TestStatusNotBucketfs(t *testing.T) {
	dir := t.TempDir()
	code, out := runBucketfs(t, nil, "status", dir)
	if code != 1 || !strings.Contains(out, "nothing is mounted") {
		t.Errorf("status of a plain directory exited %d:\n%s", code, out)
	}
	code, out = runBucketfs(t, nil, "flush", "/proc")
	if code != 1 || !strings.Contains(out, "not a bucketfs mount") {
		t.Errorf("flush of /proc exited %d:\n%s", code, out)
	}
	code, out = runBucketfs(t, nil, "flush")
	if code != 2 {
		t.Errorf("flush without a mountpoint exited %d, want 2:\n%s", code, out)
	}
}

// TestMetricsAddrTaken: a metrics address in use fails the mount at
// start, before anything is mounted; a bad one is a usage error.
func TestMetricsAddrTaken(t *testing.T) {
	emu := startEmulator(t, nil)
	first := mount(t, emu, mountOpts{args: []string{"--metrics-addr", "127.0.0.1:0"}})
	addr := strings.TrimSuffix(strings.TrimPrefix(first.metricsURL(t), "http://"), "/metrics")
	dir := t.TempDir()
	code, out := runBucketfs(t, nil, "mount", testBucket, dir, "--endpoint", emu.URL(), "--anonymous",
		"--cache-dir", t.TempDir(), "--metrics-addr", addr)
	if code != 1 || !strings.Contains(out, "--metrics-addr") {
		t.Errorf("mount with a taken metrics address exited %d:\n%s", code, out)
	}
	if mounted(dir) {
		exec.Command("fusermount3", "-uz", dir).Run()
		t.Errorf("%s was mounted after a failed start", dir)
	}
	code, out = runBucketfs(t, nil, "mount", testBucket, t.TempDir(), "--metrics-addr", "nope:port")
	if code != 2 {
		t.Errorf("mount with a bad --metrics-addr exited %d, want 2:\n%s", code, out)
	}
	first.unmount(t)
}
