package integration

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
)

// TestStalledReadRetried: a range read whose body stops mid-stream (the
// emulator holds it until the client goes away) is cancelled after
// --stall-timeout and taken up by a new request: the file reads whole
// and right long before the stall would end (it never ends by itself),
// the metric counts it, and nothing is logged as an error.
func TestStalledReadRetried(t *testing.T) {
	emu := startEmulator(t, nil)
	const size = 20 << 20
	data := testutil.RandomBytes(size, 18)
	put(t, emu, "big.bin", data)
	put(t, emu, "plain.bin", data) // the same read without a stall, for the log
	var first atomic.Bool
	stalled := emu.StallBodies(func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.Contains(r.URL.Path, "big.bin") &&
			(strings.HasPrefix(r.URL.Path, "/download/") || r.URL.Query().Get("alt") == "media") &&
			first.CompareAndSwap(false, true)
	}, 1<<20)
	m := mount(t, emu, mountOpts{args: []string{"--stall-timeout", "1s", "--metrics-addr", "127.0.0.1:0"}})
	url := m.metricsURL(t)
	start := time.Now()
	if got := readFile(t, m.path("plain.bin")); sum(got) != sum(data) {
		t.Fatal("the read without a stall got the wrong bytes")
	}
	plain := time.Since(start)
	start = time.Now()
	got := readFile(t, m.path("big.bin"))
	took := time.Since(start)
	if sum(got) != sum(data) {
		t.Fatalf("read %d bytes, not the object's %d", len(got), size)
	}
	if stalled.Load() != 1 {
		t.Fatalf("%d answers stalled, want 1 (the test did not stall the read)", stalled.Load())
	}
	if took > 15*time.Second {
		t.Errorf("the read took %v with a 1s stall timeout: the stall was waited out", took)
	}
	if v := need(t, scrape(t, url), `bucketfs_stalled_transfers_total{dir="read"}`); v < 1 {
		t.Errorf("bucketfs_stalled_transfers_total{dir=\"read\"} = %v, want at least 1", v)
	}
	if logs := m.logs.String(); strings.Contains(logs, "level=ERROR") {
		t.Errorf("an error was logged although the read got its bytes:\n%s", logs)
	}
	t.Logf("20 MiB read: %v without a stall, %v with one stalled body (stall timeout 1s)", plain, took)
}
