package cache

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil/statusfront"
	"github.com/bucketfs/bucketfs/transfer"
)

// lostAnswerEnv is a cache whose first upload takes effect in the bucket
// while its answer is lost (a 503 instead), and counters of the uploads
// the bucket received.
type lostAnswerEnv struct {
	*env
	c       *Cache
	log     *logBuffer
	uploads atomic.Int64 // upload requests that reached the emulator
	lost    atomic.Int64 // answers replaced by the 503
	landed  chan struct{}
	release chan struct{} // the lost answer goes out when closed
	stat404 atomic.Bool   // the next Stat of f is answered 404
}

func newLostAnswerEnv(t *testing.T) *lostAnswerEnv {
	l := &lostAnswerEnv{env: newEnv(t), log: new(logBuffer), landed: make(chan struct{}), release: make(chan struct{})}
	l.emu.SetHook(func(r *http.Request) (int, bool) {
		if isUpload(r) || strings.HasSuffix(r.URL.Path, "/compose") {
			l.uploads.Add(1)
		}
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/o/f") && l.stat404.CompareAndSwap(true, false) {
			return http.StatusNotFound, true
		}
		return 0, false
	})
	l.emu.SetAnswerHook(func(r *http.Request, status int) int {
		if !isUpload(r) || status != http.StatusOK || l.lost.Add(1) != 1 {
			return 0
		}
		close(l.landed)
		select {
		case <-l.release:
		case <-r.Context().Done():
		}
		return http.StatusServiceUnavailable
	})
	o := l.opts(64 << 20)
	o.WriteBackDelay = time.Hour // sent by Flush only
	o.Logger = slog.New(slog.NewTextHandler(l.log, nil))
	c, err := Open(o, l.b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	l.c = c
	return l
}

// flushLosingFirst flushes f, whose first upload's answer is lost; between
// that upload landing and its answer, meanwhile runs.
func (l *lostAnswerEnv) flushLosingFirst(meanwhile func()) {
	l.t.Helper()
	flushed := make(chan []string, 1)
	go func() { flushed <- l.c.Flush(l.ctx, nil) }()
	select {
	case <-l.landed:
	case <-l.ctx.Done():
		l.t.Fatal("the first upload never reached the bucket")
	}
	meanwhile()
	close(l.release)
	if left := <-flushed; left != nil {
		l.t.Fatalf("Flush left %v dirty", left)
	}
	l.flush(l.c) // a change made meanwhile too
}

// check verifies that the bucket holds want as f, that the bucket received
// uploads upload requests in all, and that there was no conflict.
func (l *lostAnswerEnv) check(want []byte, uploads int64, adoptions int) {
	l.t.Helper()
	if got := l.object("f"); !bytes.Equal(got, want) {
		l.t.Errorf("f in the bucket: %d bytes that are not the %d written last", len(got), len(want))
	}
	if n := l.uploads.Load(); n != uploads {
		l.t.Errorf("%d upload requests reached the bucket, want %d", n, uploads)
	}
	page, err := l.b.List(l.ctx, transfer.ListQuery{Prefix: "f.bucketfs-conflict"})
	if err != nil || len(page.Objects) != 0 || l.c.Stats().Conflicts != 0 {
		l.t.Errorf("conflict copies %v (%v), %d conflicts counted; want none: the bucket's version was this cache's own", page.Objects, err, l.c.Stats().Conflicts)
	}
	if n := strings.Count(l.log.String(), "confirmed without sending it again"); n != adoptions {
		l.t.Errorf("%d adoptions logged, want %d:\n%s", n, adoptions, l.log.String())
	}
	if strings.Contains(l.log.String(), "uploading again on top of it") {
		l.t.Errorf("an upload was queued again on top of the lost one:\n%s", l.log.String())
	}
	if _, dirty := l.c.Local("f"); dirty {
		l.t.Error("f is still a local change")
	}
}

// An upload that took effect but whose answer was lost is confirmed on
// the next try by what the bucket holds (its upload ID, size, CRC32C
// and metadata), without sending the file again. It used to be sent
// twice more: once refused by its precondition (the bucket had moved to
// the lost upload's generation), once again on top of it.
func TestLostUploadAnswerConfirmedWithoutResend(t *testing.T) {
	l := newLostAnswerEnv(t)
	data := pattern(3*chunk+17, 1)
	l.write(l.c, transfer.ObjectAttrs{Name: "f"}, true, 0, data)
	l.flushLosingFirst(func() {})
	l.check(data, 1, 1)
}

// The same, with a file changed while its lost upload was under way: the
// next try replaces the bucket's version (its own), based on it, in one
// upload and without a conflict.
func TestLostUploadAnswerChangedSinceSentOnTop(t *testing.T) {
	l := newLostAnswerEnv(t)
	data, changed := pattern(3*chunk+17, 1), pattern(2*chunk+5, 2)
	l.write(l.c, transfer.ObjectAttrs{Name: "f"}, true, 0, data)
	l.flushLosingFirst(func() {
		a, ok := l.c.Local("f")
		if !ok {
			l.t.Error("f is not a local change while it is uploaded")
			return
		}
		w, err := l.c.OpenWrite(l.ctx, a, true, false)
		if err != nil {
			l.t.Errorf("OpenWrite: %v", err)
			return
		}
		if _, err := w.WriteAt(changed, 0); err != nil {
			l.t.Errorf("WriteAt: %v", err)
		}
		if err := w.Close(); err != nil {
			l.t.Errorf("Close: %v", err)
		}
	})
	l.check(changed, 2, 0)
}

// A try that missed the lost upload before sending (here its Stat was
// answered 404) is refused by its precondition: the refusal then finds
// the bucket's version is the lost upload, the same bytes, and confirms
// it at once (it used to queue the file again, to be sent on top of
// it).
func TestRefusedByOwnLostUploadConfirms(t *testing.T) {
	l := newLostAnswerEnv(t)
	data := pattern(3*chunk+17, 1)
	l.write(l.c, transfer.ObjectAttrs{Name: "f"}, true, 0, data)
	l.flushLosingFirst(func() { l.stat404.Store(true) })
	l.check(data, 2, 1)
}

// An upload said to be complete by its session's status query, not by
// the answer to its last request, is checked against the bucket: here
// the last request was refused by its precondition (another writer
// replaced the object), that answer was lost, and the status query was
// answered with an object that does not exist (as one GCS emulator
// does). The local version goes down the conflict path: it is saved
// beside, the name shows the other writer's version. The cache used to
// record it as uploaded: Flush returned nothing left, no copy was made,
// and the local bytes were only in the cache (issue 33, item 4).
func TestUploadConfirmedByStatusQueryIsChecked(t *testing.T) {
	e := newEnv(t)
	base := e.put("f", []byte("base"))
	theirs := []byte("another writer's version")
	front := statusfront.Start(t, e.emu.URL(), func() { e.put("f", theirs) })
	g, err := transfer.NewGCS(testCtx(t, 30*time.Second), bucketName, transfer.GCSOptions{Endpoint: front.URL, Anonymous: true, ResumableThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	o := e.opts(64 << 20)
	o.WriteBackDelay = time.Hour // sent by Flush only
	c, err := Open(o, g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	mine := pattern(2*chunk+3, 7)
	e.write(c, base, true, 0, mine)
	e.flush(c)
	if front.Queries.Load() == 0 {
		t.Fatal("no status query was answered by the front: the case was not made")
	}
	if got := e.object("f"); !bytes.Equal(got, theirs) {
		t.Errorf("f holds %q, want the other writer's version", got)
	}
	page, err := e.b.List(e.ctx, transfer.ListQuery{Prefix: "f.bucketfs-conflict-"})
	if err != nil || len(page.Objects) != 1 {
		t.Fatalf("conflict copies %v (%v), want one", page.Objects, err)
	}
	if got := e.object(page.Objects[0].Name); !bytes.Equal(got, mine) {
		t.Errorf("the conflict copy holds %d bytes that are not the local version", len(got))
	}
	if n := c.Stats().Conflicts; n != 1 {
		t.Errorf("%d conflicts counted, want 1", n)
	}
}
