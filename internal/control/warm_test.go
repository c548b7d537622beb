package control

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
)

// TestWarmAndUnpin: a warm's progress and result reach the client, a
// refusal comes back as an error, the client going away stops the warm,
// and unpin answers what it unpinned.
func TestWarmAndUnpin(t *testing.T) {
	path := filepath.Join(t.TempDir(), SocketName)
	stopped := make(chan error, 1)
	s, err := Listen(path, Handler{
		Warm: func(ctx context.Context, prefixes []string, par int, pin bool, progress func(WarmProgress)) (WarmReport, error) {
			switch prefixes[0] {
			case "big":
				return WarmReport{}, errors.New("the objects do not fit in the cache: 5 bytes are missing")
			case "slow":
				progress(WarmProgress{TotalFiles: 9})
				<-ctx.Done()
				stopped <- ctx.Err()
				return WarmReport{WarmProgress: WarmProgress{TotalFiles: 9}}, ctx.Err()
			}
			progress(WarmProgress{Files: 1, TotalFiles: 2})
			r := WarmReport{WarmProgress: WarmProgress{Files: 2, TotalFiles: 2, Failed: 1, Bytes: int64(par)}, Errors: []WarmError{{Object: "a/x", Err: "gone"}}}
			if pin {
				r.AlreadyFiles = 1
			}
			return r, nil
		},
		Unpin: func(prefixes []string) (int, int64) { return len(prefixes), 42 },
	}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := testutil.Ctx(t, 30*time.Second)

	var seen []WarmProgress
	r, err := Warm(ctx, path, []string{"a"}, 77, true, func(p WarmProgress) { seen = append(seen, p) })
	if err != nil || r.Files != 2 || r.Failed != 1 || r.Bytes != 77 || r.AlreadyFiles != 1 || len(r.Errors) != 1 || r.Errors[0].Object != "a/x" {
		t.Fatalf("Warm = %+v, %v; want the handler's result", r, err)
	}
	if len(seen) != 1 || seen[0].Files != 1 {
		t.Errorf("progress %+v, want one report of 1 file", seen)
	}
	if _, err := Warm(ctx, path, []string{"big"}, 1, false, nil); err == nil || !strings.Contains(err.Error(), "5 bytes are missing") {
		t.Errorf("Warm(big) = %v, want the refusal", err)
	}

	// The client going away stops the warm.
	cctx, cancel := context.WithCancel(ctx)
	client := make(chan error, 1)
	go func() {
		_, err := Warm(cctx, path, []string{"slow"}, 1, false, func(WarmProgress) { cancel() })
		client <- err
	}()
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the warm ended with %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the warm went on after its client left")
	}
	if err := <-client; !errors.Is(err, context.Canceled) {
		t.Errorf("Warm(slow) after cancel = %v", err)
	}

	u, err := Unpin(ctx, path, []string{"a", "b"})
	if err != nil || u.Files != 2 || u.Bytes != 42 {
		t.Errorf("Unpin = %+v, %v", u, err)
	}
}
