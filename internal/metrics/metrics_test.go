package metrics

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/cache"
	"github.com/bucketfs/bucketfs/transfer"
	"github.com/prometheus/client_golang/prometheus"
)

func TestListenAddr(t *testing.T) {
	for in, want := range map[string]string{
		"9100":           "127.0.0.1:9100",
		":9100":          "127.0.0.1:9100",
		"0.0.0.0:9100":   "0.0.0.0:9100",
		"localhost:9100": "localhost:9100",
		"[::1]:9100":     "[::1]:9100",
		"127.0.0.1:0":    "127.0.0.1:0",
	} {
		got, err := ListenAddr(in)
		if err != nil || got != want {
			t.Errorf("ListenAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "host:", "99999999", "a:b:c"} {
		if got, err := ListenAddr(bad); err == nil {
			t.Errorf("ListenAddr(%q) = %q, want an error", bad, got)
		}
	}
}

type fixedStatus cache.Status

func (f *fixedStatus) Status(int) cache.Status { return cache.Status(*f) }

// TestServe scrapes a real HTTP server and finds each kind of series.
func TestServe(t *testing.T) {
	m := New("test-version")
	st := &fixedStatus{Stats: cache.Stats{Hits: 3, DirtyFiles: 2, DirtyBytes: 10, MaxBytes: 1 << 20}, Queued: 2,
		OldestDirty: time.Now().Add(-time.Minute)}
	m.WatchCache(st)
	m.FUSEOp("lookup", time.Millisecond, syscall.ENOENT)
	m.FUSEOp("read", time.Millisecond, 0)
	obs := m.Bucket()
	obs.Started("read")
	obs.Finished("read", 20*time.Millisecond, 4096, nil)
	obs.Started("stat")
	obs.Finished("stat", time.Millisecond, 0, fmt.Errorf("wrapped: %w", transfer.ErrNotExist))
	obs.Retried("stat")

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := m.Serve("127.0.0.1:0", false, log)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Addr()+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`bucketfs_build_info{version="test-version"} 1`,
		`bucketfs_fuse_requests_total{op="lookup"} 1`,
		`bucketfs_fuse_errors_total{errno="ENOENT",op="lookup"} 1`,
		`bucketfs_fuse_request_duration_seconds_count{op="read"} 1`,
		`bucketfs_bucket_requests_total{method="read"} 1`,
		`bucketfs_bucket_requests_total{method="put"} 0`,
		`bucketfs_bucket_bytes_total{method="read"} 4096`,
		`bucketfs_bucket_errors_total{kind="not_found",method="stat"} 1`,
		`bucketfs_bucket_retries_total{method="stat"} 1`,
		`bucketfs_bucket_requests_in_flight{method="read"} 0`,
		`bucketfs_cache_hits_total 3`,
		`bucketfs_cache_capacity_bytes 1.048576e+06`,
		`bucketfs_dirty_files 2`,
		`bucketfs_dirty_bytes 10`,
		`bucketfs_upload_queue_length 2`,
		`go_goroutines `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if age := sample(t, text, "bucketfs_dirty_oldest_age_seconds"); age < 59 || age > 3600 {
		t.Errorf("oldest dirty age %v, want about 60", age)
	}
}

// sample returns the value of the unlabelled series name in text.
func sample(t *testing.T, text, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no series %s", name)
	return 0
}

// TestDashboardNamesExist: every bucketfs series the Grafana dashboard
// queries is one this package exports.
func TestDashboardNamesExist(t *testing.T) {
	data, err := os.ReadFile("../../deploy/grafana/bucketfs.json")
	if err != nil {
		t.Fatal(err)
	}
	m := New("x")
	m.WatchCache(&fixedStatus{})
	known := map[string]bool{}
	descs := make(chan *prometheus.Desc, 1000)
	m.Registry().Describe(descs)
	close(descs)
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		if s := fq.FindStringSubmatch(d.String()); s != nil {
			known[s[1]] = true
		}
	}
	used := regexp.MustCompile(`bucketfs_[a-z_]+`).FindAllString(string(data), -1)
	if len(used) == 0 {
		t.Fatal("the dashboard queries no bucketfs series")
	}
	for _, name := range used {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && known[b] {
				base = b
			}
		}
		if !known[base] {
			t.Errorf("the dashboard queries %s, which is not exported", name)
		}
	}
}

// TestServeProfiles: with profiles, the heap profile is served beside
// the metrics; without, that path is not found.
func TestServeProfiles(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, profiles := range []bool{true, false} {
		s, err := New("v").Serve("127.0.0.1:0", profiles, log)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Addr()+"/debug/pprof/heap?debug=1", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			s.Close()
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s.Close()
		served := resp.StatusCode == http.StatusOK && strings.Contains(string(body), "heap profile")
		if served != profiles {
			t.Errorf("profiles %v: GET /debug/pprof/heap answered %d (%.40q)", profiles, resp.StatusCode, body)
		}
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"9100": true, ":9100": true, "127.0.0.1:9100": true, "localhost:9100": true, "[::1]:9100": true,
		"0.0.0.0:9100": false, "10.1.2.3:9100": false, "[::]:9100": false, "": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
