package cache

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// flushWithin runs c.Flush with a deadline of limit, and fails the test
// if it does not return well before it (a flush that waits for a refusal
// that will not change runs to its deadline).
func (e *env) flushWithin(c *Cache, limit time.Duration) []string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, limit)
	defer cancel()
	left := c.Flush(ctx, nil)
	if ctx.Err() != nil {
		e.t.Fatalf("Flush ran to its deadline (%v), %d names left", limit, len(left))
	}
	return left
}

// An upload the bucket refuses as invalid (400: here a name over GCS's
// 1024 bytes) is not retried forever: the file is held as a damaged one
// is, Flush returns naming it, Status lists it, its bytes stay readable,
// and Resolve ends the hold (issue 22, item 3).
func TestInvalidRefusalHoldsFile(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	long := strings.Repeat("n", 1100)
	e.write(c, transfer.ObjectAttrs{Name: long}, true, 0, []byte("kept"))
	e.write(c, transfer.ObjectAttrs{Name: "fine"}, true, 0, []byte("fine"))
	left := e.flushWithin(c, 40*time.Second)
	if !slices.Equal(left, []string{long}) {
		t.Fatalf("Flush left %d names, want the long one only", len(left))
	}
	s := c.Status(10)
	if len(s.Held) != 1 || s.Held[0].Name != long || !strings.Contains(s.Held[0].Why, "refused") || s.DamagedFiles != 1 {
		t.Errorf("Status: held %+v, %d held files; want the long name, refused", s.Held, s.DamagedFiles)
	}
	if err := c.FlushName(e.ctx, long); !errors.Is(err, ErrRefused) {
		t.Errorf("FlushName of the held file: %v, want ErrRefused", err)
	}
	w, err := c.OpenWrite(e.ctx, transfer.ObjectAttrs{Name: long}, false, false)
	if err != nil {
		t.Fatalf("open of the held file: %v", err)
	}
	buf := make([]byte, 4)
	if n, err := w.ReadAt(e.ctx, buf, 0); n != 4 || string(buf) != "kept" {
		t.Errorf("read of the held file: %q, %v", buf[:n], err)
	}
	w.Close()
	saved, err := c.Resolve(e.ctx, long, false)
	if err != nil || saved == "" {
		t.Fatalf("Resolve, taking the bucket's version: %q, %v", saved, err)
	}
	if s := c.Stats(); s.DirtyFiles != 0 || s.DamagedFiles != 0 {
		t.Errorf("after Resolve: %+v", s)
	}
}

// An upload the bucket refuses in a way a person can fix (403 here) is
// tried again later, and is reported: Status.Refused, the recent errors,
// and a Flush that returns naming it instead of waiting. Once the
// refusal is fixed, the next flush sends it.
func TestFixableRefusalReported(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	e.write(c, transfer.ObjectAttrs{Name: "f"}, true, 0, []byte("data"))
	e.emu.Fault(bucketName, http.StatusForbidden)
	left := e.flushWithin(c, 40*time.Second)
	if !slices.Equal(left, []string{"f"}) {
		t.Fatalf("Flush left %v, want [f]", left)
	}
	s := c.Status(10)
	if len(s.Refused) != 1 || s.Refused[0].Name != "f" || !strings.Contains(s.Refused[0].Why, "permission") {
		t.Errorf("Status.Refused = %+v, want f refused for permission", s.Refused)
	}
	if len(s.Held) != 0 {
		t.Errorf("Status.Held = %+v, want none: a refusal a person can fix holds nothing", s.Held)
	}
	if len(s.Errors) == 0 || s.Errors[len(s.Errors)-1].Object != "f" {
		t.Errorf("recent errors %+v, want the refusal of f", s.Errors)
	}
	e.emu.Fault(bucketName, 0)
	if left := e.flushWithin(c, 40*time.Second); left != nil {
		t.Fatalf("Flush after the fix left %v", left)
	}
	if got := string(e.object("f")); got != "data" {
		t.Errorf("f = %q", got)
	}
	if s := c.Status(10); len(s.Refused) != 0 {
		t.Errorf("Status.Refused after the upload = %+v, want none", s.Refused)
	}
}
