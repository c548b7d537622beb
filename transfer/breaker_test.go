package transfer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil/faultproxy"
)

// newBrokenGCS is a client with a breaker, reaching the emulator through
// a fault proxy.
func newBrokenGCS(t *testing.T) (*GCS, *faultproxy.Proxy, *lockedBuffer) {
	t.Helper()
	emu := startEmulator(t)
	put(t, emu, "a.txt", []byte("hello"))
	p := faultproxy.Start(t, strings.TrimPrefix(emu.URL(), "http://"))
	logs := &lockedBuffer{}
	g, err := NewGCS(context.Background(), bucketName, GCSOptions{
		Endpoint: p.URL(), Anonymous: true,
		Breaker: &BreakerOptions{Stall: time.Second, Probe: 200 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(logs, nil))},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g, p, logs
}

// waitOffline calls f until it fails with ErrOffline and returns how long
// that took; it fails the test after limit.
func waitOffline(t *testing.T, limit time.Duration, f func(ctx context.Context) error) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for {
		err := f(ctx)
		if errors.Is(err, ErrOffline) {
			return time.Since(start)
		}
		if ctx.Err() != nil {
			t.Fatalf("no ErrOffline within %v; last error: %v", limit, err)
		}
	}
}

func testBreaker(t *testing.T, fault faultproxy.Mode) {
	g, p, logs := newBrokenGCS(t)
	ctx := context.Background()
	if _, err := g.Stat(ctx, "a.txt"); err != nil {
		t.Fatalf("stat through the proxy: %v", err)
	}
	if err := p.SetMode(fault); err != nil {
		t.Fatal(err)
	}
	took := waitOffline(t, 20*time.Second, func(ctx context.Context) error {
		_, err := g.ReadRange(ctx, "a.txt", 0, 0, 5, io.Discard)
		return err
	})
	t.Logf("offline after %v", took)
	if took > 10*time.Second {
		t.Errorf("the outage took %v to detect; want seconds", took)
	}
	if g.Breaker().State().Online {
		t.Fatal("breaker says online after ErrOffline")
	}
	// Offline: calls fail at once, without a request.
	for range 20 {
		start := time.Now()
		_, err := g.Stat(ctx, "a.txt")
		if !errors.Is(err, ErrOffline) {
			t.Fatalf("stat while offline: %v, want ErrOffline", err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Fatalf("stat while offline took %v", d)
		}
	}
	if n := strings.Count(logs.String(), "working offline"); n != 1 {
		t.Errorf("%d lines say offline, want 1:\n%s", n, logs)
	}
	if err := p.SetMode(faultproxy.Pass()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.Breaker().Online():
	case <-time.After(20 * time.Second):
		t.Fatalf("breaker did not close after the bucket came back:\n%s", logs)
	}
	if _, err := g.Stat(ctx, "a.txt"); err != nil {
		t.Fatalf("stat after recovery: %v", err)
	}
	if n := strings.Count(logs.String(), "back online"); n != 1 {
		t.Errorf("%d lines say back online, want 1:\n%s", n, logs)
	}
}

func TestBreakerRefused(t *testing.T)   { testBreaker(t, faultproxy.Refuse()) }
func TestBreakerBlackHole(t *testing.T) { testBreaker(t, faultproxy.BlackHole()) }

// A request in flight when the breaker opens is cut short with ErrOffline.
func TestBreakerCutsInFlight(t *testing.T) {
	g, p, _ := newBrokenGCS(t)
	ctx := context.Background()
	if err := p.SetMode(faultproxy.BlackHole()); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	go func() { _, err := g.Stat(ctx, "a.txt"); errs <- err }()
	go func() { _, err := g.List(ctx, ListQuery{Prefix: "a"}); errs <- err }()
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrOffline) {
				t.Errorf("call in flight: %v, want ErrOffline", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("a call in flight did not end after the breaker opened")
		}
	}
}

// Without a breaker nothing changes: the library's retries still run.
func TestNoBreakerByDefault(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	if g.Breaker() != nil {
		t.Fatal("a breaker without GCSOptions.Breaker")
	}
}

// A slow answer of a bucket that answers its probe is no outage: the
// request is left to finish.
func TestBreakerLeavesSlowRequests(t *testing.T) {
	emu := startEmulator(t)
	put(t, emu, "slow.txt", []byte("slow"))
	emu.SetHook(func(r *http.Request) (int, bool) {
		if strings.Contains(r.URL.Path, "slow.txt") {
			time.Sleep(3 * time.Second) // a slow server, three times the stall bound
		}
		return 0, false
	})
	logs := &lockedBuffer{}
	g, err := NewGCS(context.Background(), bucketName, GCSOptions{
		Endpoint: emu.URL(), Anonymous: true,
		Breaker: &BreakerOptions{Stall: time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil))},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.Stat(context.Background(), "slow.txt"); err != nil {
		t.Fatalf("a slow stat: %v", err)
	}
	if !g.Breaker().State().Online || strings.Contains(logs.String(), "offline") {
		t.Fatalf("a slow request took the bucket offline:\n%s", logs)
	}
}

// 5xx answers: of one object only, no outage (the bucket answers the
// probe); of every request, offline within seconds.
func TestBreaker5xx(t *testing.T) {
	emu := startEmulator(t)
	put(t, emu, "sick.txt", []byte("sick"))
	put(t, emu, "well.txt", []byte("well"))
	var all atomic.Bool
	emu.SetHook(func(r *http.Request) (int, bool) {
		return http.StatusServiceUnavailable, all.Load() || strings.Contains(r.URL.Path, "sick.txt")
	})
	logs := &lockedBuffer{}
	g, err := NewGCS(context.Background(), bucketName, GCSOptions{
		Endpoint: emu.URL(), Anonymous: true,
		Breaker: &BreakerOptions{Stall: time.Second, Probe: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, err = g.Stat(ctx, "sick.txt") // retried by the library until ctx ends
	cancel()
	if err == nil || errors.Is(err, ErrOffline) {
		t.Fatalf("stat of an object that answers 503: %v, want the 503 (or the deadline), not ErrOffline", err)
	}
	if !g.Breaker().State().Online {
		t.Fatalf("one object's 503s took the bucket offline:\n%s", logs)
	}
	if _, err := g.Stat(context.Background(), "well.txt"); err != nil {
		t.Fatalf("stat of a well object: %v", err)
	}

	all.Store(true)
	took := waitOffline(t, 20*time.Second, func(ctx context.Context) error {
		_, err := g.Stat(ctx, "well.txt")
		return err
	})
	t.Logf("offline after %v of 503 on every request", took)
	all.Store(false)
	select {
	case <-g.Breaker().Online():
	case <-time.After(20 * time.Second):
		t.Fatalf("breaker did not close after the 503s ended:\n%s", logs)
	}
}

// A bucket that answers 503 to two requests of every three (the library
// retries them) is online: the requests succeed, and no probe is sent
// (before, each 503 sent one, and a 503 to it took the bucket offline).
func TestBreakerFlaky5xx(t *testing.T) {
	emu := startEmulator(t)
	put(t, emu, "f.txt", []byte("f"))
	var n atomic.Int64
	emu.SetHook(func(r *http.Request) (int, bool) {
		return http.StatusServiceUnavailable, n.Add(1)%3 != 0
	})
	logs := &lockedBuffer{}
	g, err := NewGCS(context.Background(), bucketName, GCSOptions{
		Endpoint: emu.URL(), Anonymous: true,
		Breaker: &BreakerOptions{Stall: time.Second, Probe: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for i := range 15 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := g.Stat(ctx, "f.txt")
		cancel()
		if err != nil {
			t.Fatalf("stat %d of a bucket answering 503 to two requests of three: %v\n%s", i, err, logs)
		}
	}
	if !g.Breaker().State().Online || strings.Contains(logs.String(), "offline") {
		t.Fatalf("a flaky bucket was taken offline:\n%s", logs)
	}
}

// Offline is closed while the breaker is open; ProbeNow asks the bucket
// at once, fails while it is away and closes the breaker when it answers.
func TestBreakerOfflineAndProbeNow(t *testing.T) {
	g, p, _ := newBrokenGCS(t)
	br := g.Breaker()
	ctx := context.Background()
	select {
	case <-br.Offline():
		t.Fatal("Offline is closed while online")
	default:
	}
	if err := br.ProbeNow(ctx); err != nil {
		t.Fatalf("ProbeNow while online: %v", err)
	}
	if err := p.SetMode(faultproxy.Refuse()); err != nil {
		t.Fatal(err)
	}
	waitOffline(t, 20*time.Second, func(ctx context.Context) error {
		_, err := g.Stat(ctx, "a.txt")
		return err
	})
	select {
	case <-br.Offline():
	case <-time.After(10 * time.Second):
		t.Fatal("Offline not closed while offline")
	}
	if err := br.ProbeNow(ctx); !errors.Is(err, ErrOffline) {
		t.Fatalf("ProbeNow while the bucket refuses: %v, want ErrOffline", err)
	}
	if err := p.SetMode(faultproxy.Pass()); err != nil {
		t.Fatal(err)
	}
	if err := br.ProbeNow(ctx); err != nil {
		t.Fatalf("ProbeNow once the bucket is back: %v", err)
	}
	if !br.State().Online {
		t.Fatal("an answered ProbeNow left the breaker open")
	}
	select {
	case <-br.Offline():
		t.Fatal("Offline still closed once back online")
	default:
	}
}
