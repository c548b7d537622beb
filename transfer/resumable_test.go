package transfer

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/crc32c"
	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"github.com/bucketfs/bucketfs/internal/testutil/statusfront"
)

// sessionLog records the requests of resumable upload sessions.
type sessionLog struct {
	mu     sync.Mutex
	starts int      // requests that opened a session
	puts   []string // Content-Range of each request to a session
	single int      // single-request uploads
}

func (l *sessionLog) hook(r *http.Request) (int, bool) {
	if !strings.HasPrefix(r.URL.Path, "/upload/") {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	q := r.URL.Query()
	switch {
	case q.Get("uploadType") != "resumable":
		l.single++
	case q.Has("upload_id"):
		l.puts = append(l.puts, r.Header.Get("Content-Range"))
	default:
		l.starts++
	}
	return 0, false
}

func (l *sessionLog) get() (starts int, puts []string, single int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.starts, append([]string(nil), l.puts...), l.single
}

// bytesObserver counts the bytes Metered reports sent by puts.
type bytesObserver struct{ sent atomic.Int64 }

func (o *bytesObserver) Started(string) {}
func (o *bytesObserver) Finished(method string, _ time.Duration, n int64, _ error) {
	if method == "put" {
		o.sent.Add(n)
	}
}
func (o *bytesObserver) Retried(string) {}

// TestResumableResumesAfterBrokenConnection: a large upload whose
// connection breaks at 90% is resumed where the session holds bytes to
// (not where the client stopped sending), not sent again from the start,
// and the object is the body, whole, through the Metered stack the cache
// uses. Without resumable sessions the upload would fail and be sent
// again whole.
func TestResumableResumesAfterBrokenConnection(t *testing.T) {
	emu := startEmulator(t)
	var log sessionLog
	emu.SetHook(log.hook)
	const size = 12 << 20
	var cut atomic.Bool
	emu.CutSessionBodies(func(r *http.Request) (emulator.SessionCut, bool) {
		return emulator.SessionCut{After: size * 9 / 10}, cut.CompareAndSwap(false, true)
	})
	obs := &bytesObserver{}
	b := NewMetered(newTestGCS(t, emu), obs)
	ctx := testutil.Ctx(t, 60*time.Second)
	data := testutil.Pattern(size, 41)
	a, err := b.Put(ctx, "big", io.NewSectionReader(bytes.NewReader(data), 0, size),
		PutOptions{IfGenerationMatch: 0, CRC32C: crc32c.Checksum(data), SendCRC32C: true, Metadata: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if a.Size != size || a.CRC32C != crc32c.Checksum(data) || a.Metadata["k"] != "v" || a.Generation == 0 {
		t.Errorf("Put answered %+v", a)
	}
	if got, err := readAll(ctx, b, "big"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the object holds %d bytes (%v); want the %d sent", len(got), err, size)
	}
	starts, puts, single := log.get()
	if starts != 1 || single != 0 || len(puts) != 3 {
		t.Errorf("sessions opened %d, requests to it %q, single uploads %d; want 1, 3 (the cut one, a status query, the rest), 0", starts, puts, single)
	} else {
		kept := size * 9 / 10 / (256 << 10) * (256 << 10)
		if want := "bytes */12582912"; puts[1] != want {
			t.Errorf("second request's Content-Range %q, want the status query %q", puts[1], want)
		}
		if want := "bytes " + strconv.Itoa(kept) + "-12582911/12582912"; puts[2] != want {
			t.Errorf("third request's Content-Range %q, want %q (from what the session kept)", puts[2], want)
		}
	}
	// What was sent: the body up to the cut (at most: the transport may
	// have read ahead of it), and the rest from what the session kept.
	if sent := obs.sent.Load(); sent > size*13/10 {
		t.Errorf("%d bytes read for the upload of %d: sent again from the start?", sent, size)
	}
}

// TestResumableResumesAfterStall: a session PUT whose body the store
// stops taking is cancelled after the stall timeout (and counted), and
// the upload goes on from what the session holds, instead of failing
// with ErrStalled as a single request does.
func TestResumableResumesAfterStall(t *testing.T) {
	emu := startEmulator(t)
	var log sessionLog
	emu.SetHook(log.hook)
	const size = 32 << 20 // more than the loopback socket buffers hold
	var once atomic.Bool
	emu.CutSessionBodies(func(r *http.Request) (emulator.SessionCut, bool) {
		return emulator.SessionCut{After: 3 << 20, Stall: true}, once.CompareAndSwap(false, true)
	})
	obs := &stallCounter{}
	g, err := NewGCS(testutil.Ctx(t, 30*time.Second), bucketName, GCSOptions{Endpoint: emu.URL(), Anonymous: true, StallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	b := NewMetered(g, obs)
	ctx := testutil.Ctx(t, 60*time.Second)
	data := testutil.Pattern(size, 42)
	if _, err := b.Put(ctx, "stalled", io.NewSectionReader(bytes.NewReader(data), 0, size), PutOptions{IfGenerationMatch: 0, CRC32C: crc32c.Checksum(data), SendCRC32C: true}); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if got, err := readAll(ctx, b, "stalled"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the object holds %d bytes (%v); want the %d sent", len(got), err, size)
	}
	if obs.get("upload") < 1 {
		t.Errorf("upload stalls counted = %d, want at least 1", obs.get("upload"))
	}
	// The cut request, a status query, then the rest from what the
	// session kept (a loaded machine may add status queries, never a
	// send from the start).
	_, puts, _ := log.get()
	fromKept, fromStart := 0, 0
	for _, p := range puts {
		switch p {
		case "bytes 3145728-33554431/33554432":
			fromKept++
		case "bytes 0-33554431/33554432":
			fromStart++
		}
	}
	if fromKept < 1 || fromStart != 1 {
		t.Errorf("requests to the session: %q; want one send from the start and the rest sent from 3 MiB, what the session kept", puts)
	}
}

// TestResumableConditionsAndChecksum: a session's upload is guarded as a
// single request is: a generation that does not match is
// ErrPrecondition, bytes whose CRC32C is not the declared one (the file
// changed after it was summed) are ErrChecksum, and neither changes the
// object.
func TestResumableConditionsAndChecksum(t *testing.T) {
	emu := startEmulator(t)
	var log sessionLog
	emu.SetHook(log.hook)
	b := newTestGCS(t, emu)
	ctx := testutil.Ctx(t, 60*time.Second)
	old := []byte("old")
	gen := put(t, emu, "obj", old)
	data := testutil.Pattern(9<<20, 43)
	body := func() io.Reader { return io.NewSectionReader(bytes.NewReader(data), 0, int64(len(data))) }
	_, err := b.Put(ctx, "obj", body(), PutOptions{IfGenerationMatch: gen + 1})
	if !errors.Is(err, ErrPrecondition) {
		t.Errorf("Put with a generation that does not match: %v, want ErrPrecondition", err)
	}
	_, err = b.Put(ctx, "obj", body(), PutOptions{IfGenerationMatch: gen, CRC32C: crc32c.Checksum(data) ^ 1, SendCRC32C: true})
	if !errors.Is(err, ErrChecksum) {
		t.Errorf("Put of bytes that are not the declared ones: %v, want ErrChecksum", err)
	}
	if got, err := readAll(ctx, b, "obj"); err != nil || !bytes.Equal(got, old) {
		t.Errorf("the object holds %q (%v), want the old %q", got, err, old)
	}
	if starts, _, single := log.get(); starts != 2 || single != 0 {
		t.Errorf("sessions %d, single uploads %d; want 2 and 0", starts, single)
	}
	a, err := b.Put(ctx, "obj", body(), PutOptions{IfGenerationMatch: gen, CRC32C: crc32c.Checksum(data), SendCRC32C: true})
	if err != nil || a.Size != int64(len(data)) {
		t.Fatalf("Put = %+v, %v", a, err)
	}
}

// TestResumableThreshold: below the threshold, or for a body that cannot
// be read again, an upload is one request; a lost session is opened
// again once and the object sent from its start.
func TestResumableThreshold(t *testing.T) {
	emu := startEmulator(t)
	var log sessionLog
	emu.SetHook(log.hook)
	b := newTestGCS(t, emu)
	ctx := testutil.Ctx(t, 60*time.Second)
	small := testutil.Pattern(DefaultResumableThreshold-1, 44)
	if _, err := b.Put(ctx, "small", io.NewSectionReader(bytes.NewReader(small), 0, int64(len(small))), PutOptions{Unconditional: true}); err != nil {
		t.Fatal(err)
	}
	big := testutil.Pattern(DefaultResumableThreshold, 45)
	if _, err := b.Put(ctx, "stream", io.MultiReader(bytes.NewReader(big)), PutOptions{Unconditional: true}); err != nil {
		t.Fatal(err)
	}
	if starts, _, single := log.get(); starts != 0 || single != 2 {
		t.Errorf("sessions %d, single uploads %d; want 0 and 2", starts, single)
	}
	// The first request to a session finds it gone.
	var gone atomic.Bool
	emu.SetHook(func(r *http.Request) (int, bool) {
		log.hook(r)
		return http.StatusNotFound, r.URL.Query().Has("upload_id") && gone.CompareAndSwap(false, true)
	})
	if _, err := b.Put(ctx, "big", io.NewSectionReader(bytes.NewReader(big), 0, int64(len(big))), PutOptions{IfGenerationMatch: 0}); err != nil {
		t.Fatalf("Put after a lost session: %v", err)
	}
	if got, err := readAll(ctx, b, "big"); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("the object holds %d bytes (%v); want the %d sent", len(got), err, len(big))
	}
	if starts, _, _ := log.get(); starts != 2 {
		t.Errorf("sessions opened: %d, want 2 (the lost one, and one more)", starts)
	}
}

// TestResumableStoreTakesNothing: a store that answers every request of
// a session "resume incomplete" without taking a byte ends the upload
// after a bounded number of requests, with an error, not a loop.
func TestResumableStoreTakesNothing(t *testing.T) {
	emu := startEmulator(t)
	var log sessionLog
	emu.SetHook(func(r *http.Request) (int, bool) {
		log.hook(r)
		return http.StatusPermanentRedirect, r.URL.Query().Has("upload_id")
	})
	g := newTestGCS(t, emu)
	g.resumeWait = time.Millisecond
	ctx := testutil.Ctx(t, 60*time.Second)
	data := testutil.Pattern(DefaultResumableThreshold, 46)
	_, err := g.Put(ctx, "never", io.NewSectionReader(bytes.NewReader(data), 0, int64(len(data))), PutOptions{IfGenerationMatch: 0})
	if err == nil {
		t.Fatal("Put succeeded against a store that took nothing")
	}
	if _, puts, _ := log.get(); len(puts) > 4*maxIdleResumes {
		t.Errorf("%d requests to the session before giving up, want at most %d", len(puts), 4*maxIdleResumes)
	}
	if _, err := emu.Object(bucketName, "never"); err == nil {
		t.Error("an object was made")
	}
}

// TestResumableQueryAnswerChecked: an upload whose last request was
// refused by its precondition (another writer replaced the object), with
// that answer lost, asks the session how far it got; a store that
// answers with an object that does not exist (one GCS emulator does) is
// not believed: the bucket is asked, and the upload fails with
// ErrPrecondition, as its last request did. It used to return the false
// object as made (issue 33, item 4).
func TestResumableQueryAnswerChecked(t *testing.T) {
	emu := startEmulator(t)
	gen := put(t, emu, "obj", []byte("base"))
	theirs := []byte("another writer's version")
	front := statusfront.Start(t, emu.URL(), func() { put(t, emu, "obj", theirs) })
	g, err := NewGCS(testutil.Ctx(t, 30*time.Second), bucketName, GCSOptions{Endpoint: front.URL, Anonymous: true, ResumableThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	g.resumeWait = time.Millisecond
	ctx := testutil.Ctx(t, 60*time.Second)
	data := testutil.Pattern(1<<20, 46)
	a, err := g.Put(ctx, "obj", io.NewSectionReader(bytes.NewReader(data), 0, int64(len(data))),
		PutOptions{IfGenerationMatch: gen, CRC32C: crc32c.Checksum(data), SendCRC32C: true, Metadata: map[string]string{"bucketfs-upload": "u1"}})
	if !errors.Is(err, ErrPrecondition) {
		t.Errorf("Put = %+v, %v; want ErrPrecondition", a, err)
	}
	if front.Lost.Load() == 0 || front.Queries.Load() == 0 {
		t.Fatalf("the front lost %d refusals and answered %d status queries: the case was not made", front.Lost.Load(), front.Queries.Load())
	}
	if got, err := readAll(ctx, g, "obj"); err != nil || !bytes.Equal(got, theirs) {
		t.Errorf("the object holds %q (%v), want the other writer's", got, err)
	}
}

// TestResumableLostAnswerConfirmed: the true answer to a status query
// (the object the lost last request made) passes the check against the
// bucket, and Put returns the bucket's object.
func TestResumableLostAnswerConfirmed(t *testing.T) {
	emu := startEmulator(t)
	var lost atomic.Int64
	emu.SetAnswerHook(func(r *http.Request, status int) int {
		if r.URL.Query().Has("upload_id") && status == http.StatusOK && lost.Add(1) == 1 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	g, err := NewGCS(testutil.Ctx(t, 30*time.Second), bucketName, GCSOptions{Endpoint: emu.URL(), Anonymous: true, ResumableThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	g.resumeWait = time.Millisecond
	ctx := testutil.Ctx(t, 60*time.Second)
	data := testutil.Pattern(1<<20, 47)
	a, err := g.Put(ctx, "obj", io.NewSectionReader(bytes.NewReader(data), 0, int64(len(data))),
		PutOptions{IfGenerationMatch: 0, CRC32C: crc32c.Checksum(data), SendCRC32C: true, Metadata: map[string]string{"bucketfs-upload": "u2"}})
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	live, err := g.Stat(ctx, "obj")
	if err != nil || live.Generation != a.Generation || a.Size != int64(len(data)) || lost.Load() < 2 {
		t.Errorf("Put = %+v, the bucket holds %+v (%v), answers lost %d; want the bucket's object, after one lost answer", a, live, err, lost.Load())
	}
}
