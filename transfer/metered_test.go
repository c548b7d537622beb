package transfer

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu       sync.Mutex
	started  map[string]int
	finished map[string]int
	errs     map[string][]error
	bytes    map[string]int64
	retries  map[string]int
	running  int
}

func newRecorder() *recorder {
	return &recorder{started: map[string]int{}, finished: map[string]int{}, errs: map[string][]error{},
		bytes: map[string]int64{}, retries: map[string]int{}}
}

func (r *recorder) Started(m string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started[m]++
	r.running++
}

func (r *recorder) Finished(m string, d time.Duration, n int64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finished[m]++
	r.running--
	r.bytes[m] += n
	if err != nil {
		r.errs[m] = append(r.errs[m], err)
	}
}

func (r *recorder) Retried(m string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retries[m]++
}

func TestMeteredConformance(t *testing.T) {
	testBucket(t, func(t *testing.T) (Bucket, *emulator.Server) {
		emu := startEmulator(t)
		return NewMetered(newTestGCS(t, emu), newRecorder()), emu
	})
}

func TestMeteredCounts(t *testing.T) {
	emu := startEmulator(t)
	rec := newRecorder()
	m := NewMetered(newTestGCS(t, emu), rec)
	ctx := testutil.Ctx(t, time.Minute)
	data := testutil.Pattern(100_000, 1)

	a, err := m.Put(ctx, "obj", bytes.NewReader(data), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := m.ReadRange(ctx, "obj", a.Generation, 10, 5000, &buf); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stat(ctx, "missing"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("Stat(missing) = %v, want ErrNotExist", err)
	}
	// The next stat fails twice with 503 before the fake answers: the
	// client retries it, and each repeat is one retry.
	var faults atomic.Int32
	emu.SetHook(func(r *http.Request) (int, bool) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/o/obj") && faults.Add(1) <= 2 {
			return http.StatusServiceUnavailable, true
		}
		return 0, false
	})
	if _, err := m.Stat(ctx, "obj"); err != nil {
		t.Fatalf("Stat with two 503s first: %v", err)
	}
	emu.SetHook(nil)
	if _, err := m.List(ctx, ListQuery{Prefix: "o"}); err != nil {
		t.Fatal(err)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := map[string]int{"put": 1, "read": 1, "stat": 2, "list": 1}
	for method, n := range want {
		if rec.started[method] != n || rec.finished[method] != n {
			t.Errorf("%s: started %d, finished %d, want %d", method, rec.started[method], rec.finished[method], n)
		}
	}
	if rec.running != 0 || m.InFlight() != 0 {
		t.Errorf("running %d, InFlight %d after every call returned", rec.running, m.InFlight())
	}
	if rec.bytes["put"] != int64(len(data)) || rec.bytes["read"] != 5000 {
		t.Errorf("bytes put %d read %d, want %d and 5000", rec.bytes["put"], rec.bytes["read"], len(data))
	}
	if len(rec.errs["stat"]) != 1 || !errors.Is(rec.errs["stat"][0], ErrNotExist) {
		t.Errorf("stat errors %v, want one ErrNotExist", rec.errs["stat"])
	}
	if rec.retries["stat"] != 2 {
		t.Errorf("stat retries = %d, want 2 (the two 503s)", rec.retries["stat"])
	}
	for _, method := range []string{"put", "read", "list"} {
		if rec.retries[method] != 0 {
			t.Errorf("%s retries = %d, want 0", method, rec.retries[method])
		}
	}
}
