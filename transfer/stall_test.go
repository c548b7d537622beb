package transfer

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
)

// stallCounter is an Observer that counts stalls by direction.
type stallCounter struct {
	mu     sync.Mutex
	stalls map[string]int
}

func (s *stallCounter) Started(string)                               {}
func (s *stallCounter) Finished(string, time.Duration, int64, error) {}
func (s *stallCounter) Retried(string)                               {}
func (s *stallCounter) Stalled(dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stalls == nil {
		s.stalls = map[string]int{}
	}
	s.stalls[dir]++
}

func (s *stallCounter) get(dir string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stalls[dir]
}

// newStallGCS is newTestGCS with a short stall timeout, metered by o. Its
// uploads are single requests (resumable_test.go has the sessions').
func newStallGCS(t *testing.T, url string, timeout time.Duration, o Observer) Bucket {
	t.Helper()
	g, err := NewGCS(testutil.Ctx(t, 30*time.Second), bucketName, GCSOptions{Endpoint: url, Anonymous: true, StallTimeout: timeout, ResumableThreshold: -1})
	if err != nil {
		t.Fatalf("NewGCS: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return NewMetered(g, o)
}

// TestReadRangeStallRetried: a body that stops mid-stream (the server
// holds it until the client goes away) is cancelled after the stall
// timeout and the rest is read by a new request: the right bytes, long
// before the stall would end, and the stall counted.
func TestReadRangeStallRetried(t *testing.T) {
	emu := startEmulator(t)
	const size = 4 << 20
	data := testutil.Pattern(size, 31)
	gen := put(t, emu, "obj", data)
	var once atomic.Bool
	var mu sync.Mutex
	var starts []int64
	emu.SetHook(func(r *http.Request) (int, bool) {
		if isMediaRead(r) {
			mu.Lock()
			starts = append(starts, rangeStart(r))
			mu.Unlock()
		}
		return 0, false
	})
	stalled := emu.StallBodies(func(r *http.Request) bool { return isMediaRead(r) && once.CompareAndSwap(false, true) }, 1<<20)
	obs := &stallCounter{}
	b := newStallGCS(t, emu.URL(), 300*time.Millisecond, obs)
	ctx := testutil.Ctx(t, 60*time.Second)
	var buf bytes.Buffer
	start := time.Now()
	n, err := b.ReadRange(ctx, "obj", gen, 0, size, &buf)
	took := time.Since(start)
	if err != nil || n != size {
		t.Fatalf("ReadRange = %d, %v; want %d bytes", n, err, size)
	}
	if !bytes.Equal(buf.Bytes(), data) {
		t.Fatal("ReadRange wrote the wrong bytes")
	}
	if took > 10*time.Second {
		t.Errorf("the read took %v: the stall was waited out", took)
	}
	// At least: on a loaded machine the retry itself may pause for the
	// 300 ms of the timeout, and is then retried as well.
	if stalled.Load() != 1 || obs.get("read") < 1 {
		t.Errorf("stalled answers = %d, stalls counted = %d; want 1 and at least 1", stalled.Load(), obs.get("read"))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(starts) < 2 || starts[1] <= 0 {
		t.Errorf("range reads started at %v; want 2 or more, the second where the first stopped", starts)
	}
}

// TestPutStallFails: an upload whose body the server stops taking is
// cancelled after the stall timeout with ErrStalled (the caller sends
// it again), and the stall is counted.
func TestPutStallFails(t *testing.T) {
	emu := startEmulator(t)
	var once atomic.Bool
	emu.SetHook(func(r *http.Request) (int, bool) {
		if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/upload/") || !once.CompareAndSwap(false, true) {
			return 0, false
		}
		io.CopyN(io.Discard, r.Body, 1<<20) // takes a little, then no more
		<-r.Context().Done()
		return http.StatusServiceUnavailable, true
	})
	obs := &stallCounter{}
	b := newStallGCS(t, emu.URL(), 300*time.Millisecond, obs)
	ctx := testutil.Ctx(t, 60*time.Second)
	const size = 32 << 20 // more than the loopback socket buffers hold
	start := time.Now()
	_, err := b.Put(ctx, "up", bytes.NewReader(testutil.Pattern(size, 32)), PutOptions{IfGenerationMatch: 0})
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("Put: err = %v, want ErrStalled", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Put took %v to give up", took)
	}
	if obs.get("upload") != 1 {
		t.Errorf("upload stalls counted = %d, want 1", obs.get("upload"))
	}
	// Sent again, it goes through: a client with a stall timeout that a
	// loaded machine (race detector, other packages' tests beside it)
	// cannot reach by accident, as 300 ms was reached in a CI run.
	again := newStallGCS(t, emu.URL(), 30*time.Second, obs)
	if _, err := again.Put(ctx, "up", bytes.NewReader(testutil.Pattern(size, 32)), PutOptions{IfGenerationMatch: 0}); err != nil {
		t.Fatalf("Put again: %v", err)
	}
}

// TestUploadPartStallFails: a part of an XML multipart upload whose body
// the server stops taking is cancelled after the stall timeout with
// ErrStalled, and the stall is counted; a part the server takes whole is
// sent as before.
func TestUploadPartStallFails(t *testing.T) {
	var stallNext atomic.Bool
	stallNext.Store(true)
	// A server that has not read a body does not see its client go: the
	// stalled handler waits for the test's end instead.
	end := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stallNext.CompareAndSwap(true, false) {
			io.CopyN(io.Discard, r.Body, 1<<20) // takes a little, then no more
			select {
			case <-r.Context().Done():
			case <-end:
			}
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("ETag", `"etag"`)
	}))
	defer srv.Close()
	defer close(end)
	mp, err := NewMultipart(MultipartOptions{Endpoint: srv.URL, Bucket: bucketName, StallTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	obs := &stallCounter{}
	api := NewMetered(nil, obs).Multipart(mp)
	ctx := testutil.Ctx(t, 60*time.Second)
	const size = 32 << 20 // more than the loopback socket buffers hold
	part := bytes.NewReader(testutil.Pattern(size, 33))
	start := time.Now()
	if _, err := api.UploadPart(ctx, "obj", "upload-1", 1, part, size, 0); !errors.Is(err, ErrStalled) {
		t.Fatalf("UploadPart: err = %v, want ErrStalled", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("UploadPart took %v to give up", took)
	}
	if obs.get("upload") != 1 {
		t.Errorf("upload stalls counted = %d, want 1", obs.get("upload"))
	}
	// Sent again through a client whose stall timeout a loaded machine
	// cannot reach by accident.
	mp2, err := NewMultipart(MultipartOptions{Endpoint: srv.URL, Bucket: bucketName, StallTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetered(nil, obs).Multipart(mp2).UploadPart(ctx, "obj", "upload-1", 1, part, size, 0); err != nil {
		t.Fatalf("UploadPart again: %v", err)
	}
}

// TestPutNoAnswerFails: an upload whose whole body the server took but
// which it never answers is cancelled after answerWaits stall timeouts
// with ErrStalled, not waited for as long as the connection stays up
// (before, the watch stopped once the body was sent).
func TestPutNoAnswerFails(t *testing.T) {
	emu := startEmulator(t)
	emu.SetHook(func(r *http.Request) (int, bool) {
		if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/upload/") {
			return 0, false
		}
		io.Copy(io.Discard, r.Body) // all of it, then no answer
		<-r.Context().Done()
		return http.StatusServiceUnavailable, true
	})
	obs := &stallCounter{}
	b := newStallGCS(t, emu.URL(), 300*time.Millisecond, obs)
	ctx := testutil.Ctx(t, 60*time.Second)
	start := time.Now()
	_, err := b.Put(ctx, "quiet", bytes.NewReader([]byte("small body")), PutOptions{IfGenerationMatch: 0})
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("Put: err = %v, want ErrStalled", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("Put took %v to give up", took)
	}
}
