package write

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fake is a Cache that records the calls a handle makes, in order.
type fake struct {
	calls    []string
	max      int64 // MaxFileSize
	size     int64 // what the record says (Size; spans are said of it)
	beginErr error
	watch    bool // Watch's answer
	holds    bool // what Untouched was told
}

func (c *fake) call(format string, a ...any) { c.calls = append(c.calls, fmt.Sprintf(format, a...)) }

func (c *fake) MaxFileSize() int64    { return c.max }
func (c *fake) Name() string          { return "f" }
func (c *fake) Grow(size int64) error { c.call("Grow %d", size); return nil }
func (c *fake) Unreserve()            { c.call("Unreserve") }
func (c *fake) End(minSize int64)     { c.call("End %d", minSize) }
func (c *fake) Resize(size int64)     { c.call("Resize %d", size) }
func (c *fake) CountRead(n int64)     { c.call("CountRead %d", n) }
func (c *fake) Size() (int64, bool)   { return c.size, false }
func (c *fake) Record() (bool, error) { c.call("Record"); return false, nil }
func (c *fake) Watch() bool           { c.call("Watch"); return c.watch }
func (c *fake) Close()                { c.call("Close") }
func (c *fake) Begin(span Span) error {
	if span == nil {
		c.call("Begin hidden")
	} else {
		from, to := span(c.size)
		c.call("Begin %d-%d", from, to)
	}
	return c.beginErr
}
func (c *fake) CheckRead(f *os.File, off, n int64) error {
	c.call("CheckRead %d+%d", off, n)
	return nil
}
func (c *fake) Untouched(f *os.File, holds bool) bool {
	c.call("Untouched %v", holds)
	c.holds = holds
	return holds
}

func open(t *testing.T, c *fake, content string, hidden bool) *Handle {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.size = int64(len(content))
	return New(c, f, hidden)
}

func (c *fake) want(t *testing.T, want ...string) {
	t.Helper()
	if !slices.Equal(c.calls, want) {
		t.Errorf("calls:\n  %s\nwant:\n  %s", strings.Join(c.calls, "\n  "), strings.Join(want, "\n  "))
	}
	c.calls = nil
}

// A write reserves its room, begins (its span said of the size the
// record has then), writes, and ends at its end; a read is checked,
// then counted.
func TestWriteOrder(t *testing.T) {
	c := &fake{max: 1 << 20}
	h := open(t, c, "0123456789", false)
	if _, err := h.WriteAt([]byte("abc"), 20); err != nil {
		t.Fatal(err)
	}
	c.want(t, "Grow 23", "Begin 10-23", "End 23")
	p := make([]byte, 4)
	if _, err := h.ReadAt(context.Background(), p, 0); err != nil || string(p) != "0123" {
		t.Fatalf("read %q, %v", p, err)
	}
	c.want(t, "CheckRead 0+4", "CountRead 4")
	if err := h.Truncate(4); err != nil {
		t.Fatal(err)
	}
	c.want(t, "Grow 4", "Begin 4-10", "Resize 4", "End 0")
	if err := h.Sync(); err != nil {
		t.Fatal(err)
	}
	c.want(t, "Record")
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	h.Close()
	c.want(t, "Close")
}

// Nothing is written for a change that did not begin, and its room is
// given back; nothing past the largest file is reserved or begun.
func TestWriteRefused(t *testing.T) {
	c := &fake{max: 12, beginErr: errors.New("journal full")}
	h := open(t, c, "0123456789", false)
	defer h.Close()
	if _, err := h.WriteAt([]byte("ab"), 0); !errors.Is(err, c.beginErr) {
		t.Fatalf("write: %v, want the begin's error", err)
	}
	c.want(t, "Grow 2", "Begin 0-2", "Unreserve")
	if b, _ := os.ReadFile(h.File().Name()); string(b) != "0123456789" {
		t.Errorf("file %q after a change that did not begin", b)
	}
	if _, err := h.WriteAt([]byte("ab"), 12); !errors.Is(err, ErrTooBig) {
		t.Errorf("write at the limit: %v, want ErrTooBig", err)
	}
	if err := h.Allocate(0, 13); !errors.Is(err, ErrTooBig) {
		t.Errorf("allocation past the limit: %v, want ErrTooBig", err)
	}
	c.want(t)
	c.beginErr = nil
	if n, err := h.WriteAt([]byte("abcd"), 10); n != 2 || err != nil {
		t.Errorf("write across the limit: %d, %v; want it cut short at 2", n, err)
	}
	c.want(t, "Grow 12", "Begin 10-12", "End 12")
}

// A hidden handle's one change: begun with no span, ended at the close
// with the file's size; with a mark that holds, the cache is asked to
// undo it instead.
func TestHiddenChange(t *testing.T) {
	c := &fake{max: 1 << 20}
	h := open(t, c, "0123456789", true)
	if err := h.BeginHidden(nil); err != nil {
		t.Fatal(err)
	}
	h.File().WriteAt([]byte("kernel"), 10)
	h.Close()
	c.want(t, "Begin hidden", "Resize 16", "End 0", "Close")

	for _, write := range []bool{false, true} {
		c := &fake{max: 1 << 20, watch: true}
		h := open(t, c, "0123456789", true)
		if err := h.BeginHidden(new(Mark)); err != nil {
			t.Fatal(err)
		}
		if write {
			h.File().WriteAt([]byte("x"), 0) // the size stays: only the time tells
		}
		h.Close()
		if write {
			c.want(t, "Begin hidden", "Watch", "Untouched false", "Resize 10", "End 0", "Close")
		} else {
			c.want(t, "Begin hidden", "Watch", "Untouched true", "Close")
		}
	}
}

// A hidden change that cannot begin closes the handle: no End.
func TestHiddenRefused(t *testing.T) {
	c := &fake{max: 1 << 20, beginErr: errors.New("damaged")}
	h := open(t, c, "0123456789", true)
	if err := h.BeginHidden(new(Mark)); !errors.Is(err, c.beginErr) {
		t.Fatalf("begin: %v", err)
	}
	c.want(t, "Begin hidden", "Close")
	if _, err := h.File().Stat(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("the file is still open: %v", err)
	}
}
