package transfer

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/crc32c"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// The compose into place takes effect, but its answer is lost (a 503 in
// its stead): the client sends it again, and the retry is refused (the
// first deleted the sources and made a new generation). The upload succeeds with the object in
// place, which carries its upload ID; without an ID to tell it by, the
// error stands. On both paths: parts composed, and XML multipart.
func TestComposeAnswerLostTakesObjectInPlace(t *testing.T) {
	for _, xml := range []bool{false, true} {
		name := map[bool]string{false: "composed", true: "xml"}[xml]
		t.Run(name, func(t *testing.T) {
			emu := startEmulator(t)
			b := newTestGCS(t, emu)
			ctx := testutil.Ctx(t, 60*time.Second)
			o := ParallelOptions{PartSize: 1 << 10}
			data := testutil.Pattern(5<<10+7, 3)
			if xml {
				o = ParallelOptions{PartSize: MinPartSize, Multipart: newMemMultipart(b)}
			}
			p := newParallel(t, b, o)
			var composes, lost atomic.Int64
			emu.SetHook(func(r *http.Request) (int, bool) {
				if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/compose") {
					composes.Add(1)
				}
				return 0, false
			})
			emu.SetAnswerHook(func(r *http.Request, status int) int {
				if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/o/obj/compose") && status == http.StatusOK && lost.Add(1) == 1 {
					return http.StatusServiceUnavailable
				}
				return 0
			})
			po := PutOptions{IfGenerationMatch: 0, Metadata: map[string]string{"bucketfs-upload": "0123456789abcdef", "k": "v"},
				CRC32C: crc32c.Checksum(data), SendCRC32C: true}
			a, err := p.Put(ctx, "obj", bytes.NewReader(data), int64(len(data)), po, NewStaging())
			if err != nil {
				t.Fatalf("Put: %v; want the object in place taken", err)
			}
			live, err := b.Stat(ctx, "obj")
			if err != nil || a.Generation != live.Generation || a.Size != int64(len(data)) {
				t.Errorf("Put returned generation %d, %d bytes; the bucket has %+v (%v)", a.Generation, a.Size, live, err)
			}
			if got, err := readAll(ctx, b, "obj"); err != nil || !bytes.Equal(got, data) {
				t.Errorf("the object holds %d bytes (err %v), want the %d sent", len(got), err, len(data))
			}
			if n := composes.Load(); n != 2 {
				t.Errorf("%d composes into place, want 2 (the lost one and the client's retry)", n)
			}

			// No upload ID: an object in place cannot be told from
			// another writer's.
			lost.Store(0)
			po.Metadata, po.IfGenerationMatch = nil, live.Generation
			if _, err := p.Put(ctx, "obj", bytes.NewReader(data), int64(len(data)), po, NewStaging()); !errors.Is(err, ErrNotExist) && !errors.Is(err, ErrPrecondition) {
				t.Errorf("Put without metadata, its answer lost: err %v, want the retry's refusal", err)
			}
		})
	}
}

// A bucket that refuses (400) to compose an object made by an XML
// multipart upload, as GCS's documentation once said it would: the
// upload is sent again as one resumable upload under the same
// conditions, metadata and checksum, the staged object goes, and later
// uploads compose parts instead, without the XML API; said once.
func TestXMLComposeRefusedFallsBack(t *testing.T) {
	emu := startEmulator(t)
	b := newTestGCS(t, emu)
	ctx := testutil.Ctx(t, 60*time.Second)
	var refused, direct, composes atomic.Int64
	emu.SetHook(func(r *http.Request) (int, bool) {
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/upload/") && r.URL.Query().Get("name") == "obj" {
			direct.Add(1) // not a staged part: the object itself
		}
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/compose") {
			return 0, false
		}
		composes.Add(1)
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if strings.Contains(string(body), "/object\"") { // the XML path's staged object
			refused.Add(1)
			return http.StatusBadRequest, true
		}
		return 0, false
	})
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))
	mp := newMemMultipart(b)
	p := newParallel(t, b, ParallelOptions{PartSize: 16 << 10, Multipart: mp, Logger: log}) // the XML path raises it to MinPartSize
	data := testutil.Pattern(64<<10+7, 4)                                                   // one part: the XML path takes a last part of any size
	old := put(t, emu, "obj", []byte("old"))
	po := PutOptions{IfGenerationMatch: old, ContentType: "application/x-test", Metadata: map[string]string{"bucketfs-upload": "0123456789abcdef", "k": "v"},
		CRC32C: crc32c.Checksum(data), SendCRC32C: true}
	staging := NewStaging()
	a, err := p.Put(ctx, "obj", bytes.NewReader(data), int64(len(data)), po, staging)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	live, err := b.Stat(ctx, "obj")
	if err != nil || live.Generation != a.Generation || live.ContentType != po.ContentType || !maps.Equal(live.Metadata, po.Metadata) {
		t.Errorf("the bucket has %+v (%v), want generation %d, content type and metadata of %+v", live, err, a.Generation, po)
	}
	if got, err := readAll(ctx, b, "obj"); err != nil || !bytes.Equal(got, data) {
		t.Errorf("obj holds %d bytes (err %v), want the %d sent", len(got), err, len(data))
	}
	if left := stagedNames(t, ctx, b); len(left) != 0 {
		t.Errorf("staged objects left before Clean: %v", left)
	}
	if refused.Load() != 1 || direct.Load() != 1 {
		t.Errorf("%d composes refused, %d uploads of obj itself; want 1 and 1 (a resumable upload: under its chunk size, the client sends it in one request)", refused.Load(), direct.Load())
	}

	// The next upload composes parts, and keeps its precondition.
	composes.Store(0)
	if _, err := p.Put(ctx, "obj2", bytes.NewReader(data), int64(len(data)), PutOptions{IfGenerationMatch: 0}, NewStaging()); err != nil {
		t.Fatalf("second Put: %v", err)
	}
	if got, err := readAll(ctx, b, "obj2"); err != nil || !bytes.Equal(got, data) {
		t.Errorf("obj2 holds %d bytes (err %v), want the %d sent", len(got), err, len(data))
	}
	if _, err := p.Put(ctx, "obj2", bytes.NewReader(data), int64(len(data)), PutOptions{IfGenerationMatch: 0}, NewStaging()); !errors.Is(err, ErrPrecondition) {
		t.Errorf("Put over an existing obj2 with ifGenerationMatch=0: %v, want ErrPrecondition", err)
	}
	if composes.Load() != 2 {
		t.Errorf("%d composes for two uploads in parts, want 2", composes.Load())
	}
	mp.mu.Lock()
	calls := strings.Join(mp.calls, ",")
	mp.mu.Unlock()
	if calls != "initiate,complete" || refused.Load() != 1 {
		t.Errorf("calls to the XML API: %q, %d refused composes; want one upload by it, then none", calls, refused.Load())
	}
	logMu.Lock()
	if n := strings.Count(logs.String(), "refuses to compose an object made by an XML multipart upload"); n != 1 {
		t.Errorf("the switch was logged %d times, want once:\n%s", n, logs.String())
	}
	logMu.Unlock()

	// The resumable upload keeps the caller's precondition: a stale one
	// changes nothing.
	p2 := newParallel(t, b, ParallelOptions{PartSize: MinPartSize, Multipart: newMemMultipart(b), Logger: log})
	if _, err := p2.Put(ctx, "obj", bytes.NewReader(data[:1000]), 1000, PutOptions{IfGenerationMatch: old}, NewStaging()); !errors.Is(err, ErrPrecondition) {
		t.Errorf("Put with a stale generation: %v, want ErrPrecondition", err)
	}
	if after, err := b.Stat(ctx, "obj"); err != nil || after.Generation != a.Generation {
		t.Errorf("after a refused Put, obj is %+v (%v), want generation %d", after, err, a.Generation)
	}
}
