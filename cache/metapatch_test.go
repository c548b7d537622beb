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

// An open for writing through passthrough that writes nothing gives back
// its change at the close only if nothing else changed the file since
// it joined: another handle that wrote the file in place (same size)
// between the join and the passthrough handle's first change keeps its
// write. Before, the mark was set on the written file and the change
// counted as the passthrough handle's own: the close made the record
// clean again, and the write never reached the bucket.
func TestUntouchedOpenKeepsAnotherWrite(t *testing.T) {
	e := newEnv(t)
	a := e.put("f", []byte("hello world"))
	c := e.openWB(time.Hour)
	e.cacheAll(c, a, []byte("hello world"))
	testAfterJoin = func(name string) {
		testAfterJoin = nil
		e.write(c, a, false, 0, []byte("HELLO")) // open, write in place, close
	}
	defer func() { testAfterJoin = nil }()
	h, err := c.OpenWrite(e.ctx, a, false, true) // hidden: the kernel writes
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil { // the kernel wrote nothing through it
		t.Fatal(err)
	}
	e.flush(c)
	if got := e.object("f"); string(got) != "HELLO world" {
		t.Errorf("the bucket has %q, want %q", got, "HELLO world")
	}
}
