package transfer

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
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
