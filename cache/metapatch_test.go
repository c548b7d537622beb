package cache

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// PatchMeta patches the version it is given, and only that one: a
// version replaced since is left alone (ErrPrecondition), and a file
// not in the bucket is refused without a request.
func TestPatchMeta(t *testing.T) {
	e := newEnv(t)
	c := e.open(1 << 20)
	a := e.put("big", []byte("content"))
	na, err := c.PatchMeta(e.ctx, a, map[string]string{"k": "v"})
	if err != nil || na.Metadata["k"] != "v" || na.Generation != a.Generation {
		t.Fatalf("PatchMeta = %+v, %v; want key k=v on generation %d", na, err, a.Generation)
	}
	if got, err := e.b.Stat(e.ctx, "big"); err != nil || got.Metadata["k"] != "v" {
		t.Errorf("the bucket holds %+v, %v; want key k=v", got, err)
	}

	newer := e.put("big", []byte("changed elsewhere"))
	if _, err := c.PatchMeta(e.ctx, a, map[string]string{"k": "w"}); !errors.Is(err, transfer.ErrPrecondition) {
		t.Errorf("PatchMeta of a replaced version: %v, want ErrPrecondition", err)
	}
	if got, _ := e.b.Stat(e.ctx, "big"); got.Generation != newer.Generation || got.Metadata["k"] != "" {
		t.Errorf("the newer version was changed: %+v", got)
	}

	before := e.emu.Requests()
	if _, err := c.PatchMeta(e.ctx, transfer.ObjectAttrs{Name: "new"}, map[string]string{"k": "v"}); err == nil {
		t.Error("PatchMeta of a file not in the bucket succeeded")
	}
	if n := e.emu.Requests() - before; n != 0 {
		t.Errorf("PatchMeta of a file not in the bucket made %d requests", n)
	}
}

// A metadata change recorded on generation 0 (a caller that did not know
// the object's version) is dropped with a warning at its first try, never
// sent as a patch without a condition and retried for ever: a flush ends.
func TestMetaOnlyWithoutVersionEnds(t *testing.T) {
	e := newEnv(t)
	c := e.open(1 << 20)
	t.Cleanup(func() { c.Close() })
	a := e.put("f", []byte("content"))
	stale := a
	stale.Generation = 0
	if err := c.SetMeta(e.ctx, stale, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	if err := c.FlushName(ctx, "f"); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if got, err := e.b.Stat(e.ctx, "f"); err != nil || got.Generation != a.Generation {
		t.Errorf("the bucket holds %+v, %v; want generation %d untouched", got, err, a.Generation)
	}
}
