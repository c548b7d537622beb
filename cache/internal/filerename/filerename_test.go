package filerename

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/transfer"
)

// fake is a cache: it logs every call, in order, and its cache files
// are in dir, file i holding i bytes of content.
type fake struct {
	t         *testing.T
	dir       string
	calls     []string
	pending   bool  // PendingCopy says yes
	appendErr error // the journal refuses
	nextID    uint64
}

type writer struct{ f *os.File }

func (w writer) File() *os.File { return w.f }
func (w writer) Close() error   { return w.f.Close() }

func (c *fake) log(format string, args ...any) {
	c.calls = append(c.calls, fmt.Sprintf(format, args...))
}

func (c *fake) path(id uint64) string { return filepath.Join(c.dir, fmt.Sprint(id)) }

// file makes cache file id, size bytes long.
func (c *fake) file(id uint64, size int) {
	if err := os.WriteFile(c.path(id), make([]byte, size), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

func (c *fake) Open(ctx context.Context, a transfer.ObjectAttrs) (string, Writer, error) {
	c.log("open %s", a.Name)
	f, err := os.OpenFile(c.path(uint64(a.Generation)), os.O_RDWR, 0)
	if err != nil {
		return "", nil, err
	}
	return a.Name, writer{f}, nil
}

func (c *fake) ending(links []Link, ops int, tomb *durable.Record) Begun {
	return Begun{Links: links, Ops: make([]durable.Op, ops), Tomb: tomb, Ending: fakeEnding{c}}
}

func (c *fake) PendingCopy(from, to string, toBase int64, id uint64) (Begun, bool) {
	c.log("pending %s %s %d", from, to, id)
	if !c.pending {
		return Begun{}, false
	}
	return c.ending([]Link{{From: 1, To: id}}, 2, &durable.Record{ID: 1}), true
}

func (c *fake) Rename(ctx context.Context, w string, from, to string, toBase int64, id uint64, size int64) (Begun, error) {
	c.log("rename %s %s %s %d size %d", w, from, to, id, size)
	return c.ending([]Link{{From: 1, To: id}}, 2, &durable.Record{ID: 1}), nil
}

func (c *fake) Exchange(ctx context.Context, wa, wb string, a, b string, idA, idB uint64, sizeA, sizeB int64) (Begun, error) {
	c.log("exchange %s %s sizes %d %d", wa, wb, sizeA, sizeB)
	return c.ending([]Link{{From: 2, To: idA}, {From: 1, To: idB}}, 2, nil), nil
}

type fakeEnding struct{ c *fake }

func (e fakeEnding) Undo(err error) { e.c.log("undo %v", err) }
func (e fakeEnding) Apply() []int64 { e.c.log("apply"); return []int64{7, 8} }

func (c *fake) NewID() uint64 { c.nextID++; return 100 + c.nextID }
func (c *fake) LinkFile(from, to uint64) error {
	if err := os.Link(c.path(from), c.path(to)); err != nil {
		return err
	}
	c.log("made %d", to)
	return nil
}
func (c *fake) Append(ops ...durable.Op) error {
	// Files before records: every file the entry names exists.
	entries, _ := os.ReadDir(c.dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	c.log("append %d files %s", len(ops), strings.Join(names, ","))
	return c.appendErr
}

func newFake(t *testing.T) (*fake, Flow[string]) {
	c := &fake{t: t, dir: t.TempDir()}
	c.file(1, 10)
	c.file(2, 20)
	f := Flow[string]{Ledger: c, Journal: c, Path: c.path, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Detach: func(id uint64, name string, rec durable.Record) error {
			c.log("detach %d %s", id, name)
			return nil
		}}
	return c, f
}

func check(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestRenameOrder(t *testing.T) {
	c, f := newFake(t)
	base, err := f.Rename(context.Background(), transfer.ObjectAttrs{Name: "a", Generation: 1}, "b", 5)
	if err != nil || base != 7 {
		t.Fatalf("Rename = %d, %v", base, err)
	}
	// The shortcut is asked first (its ID taken), the source opened
	// (its copy complete) and sized, the journal written once the link
	// is made, the old name detached before the change is applied.
	check(t, c.calls, "pending a b 101", "open a", "rename a a b 102 size 10", "made 102",
		"append 2 files 1,102,2", "detach 1 a", "apply")
}

func TestPendingCopyOpensNothing(t *testing.T) {
	c, f := newFake(t)
	c.pending = true
	if _, err := f.Rename(context.Background(), transfer.ObjectAttrs{Name: "a", Generation: 1}, "b", 5); err != nil {
		t.Fatal(err)
	}
	// The pending copy's old name is detached after the change applies.
	check(t, c.calls, "pending a b 101", "made 101", "append 2 files 1,101,2", "apply", "detach 1 a")
}

func TestRefusedRenameIsUndone(t *testing.T) {
	c, f := newFake(t)
	c.appendErr = errors.New("refused")
	_, err := f.Rename(context.Background(), transfer.ObjectAttrs{Name: "a", Generation: 1}, "b", 5)
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("Rename = %v, want the journal's refusal", err)
	}
	check(t, c.calls, "pending a b 101", "open a", "rename a a b 102 size 10", "made 102",
		"append 2 files 1,102,2", "undo refused")
	if _, err := os.Stat(c.path(102)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused rename's file is still there: %v", err)
	}
}

func TestRenameWithoutItsFileWritesNothing(t *testing.T) {
	c, f := newFake(t)
	c.pending = true
	os.Remove(c.path(1)) // nothing to link
	if _, err := f.Rename(context.Background(), transfer.ObjectAttrs{Name: "a", Generation: 1}, "b", 5); err == nil {
		t.Fatal("Rename succeeded without its file")
	}
	if len(c.calls) != 2 || !strings.HasPrefix(c.calls[1], "undo ") {
		t.Errorf("calls %q, want the pending copy's begin, then its undo, and no journal entry", c.calls)
	}
}

func TestSameName(t *testing.T) {
	c, f := newFake(t)
	if base, err := f.Rename(context.Background(), transfer.ObjectAttrs{Name: "a", Generation: 1}, "a", 5); err != nil || base != 5 {
		t.Errorf("Rename onto itself = %d, %v; want 5", base, err)
	}
	a, b := transfer.ObjectAttrs{Name: "a", Generation: 3}, transfer.ObjectAttrs{Name: "a", Generation: 4}
	if ga, gb, err := f.Exchange(context.Background(), a, b); err != nil || ga != 3 || gb != 4 {
		t.Errorf("Exchange with itself = %d, %d, %v", ga, gb, err)
	}
	check(t, c.calls)
}

func TestExchange(t *testing.T) {
	c, f := newFake(t)
	ga, gb, err := f.Exchange(context.Background(), transfer.ObjectAttrs{Name: "a", Generation: 1}, transfer.ObjectAttrs{Name: "b", Generation: 2})
	if err != nil || ga != 7 || gb != 8 {
		t.Fatalf("Exchange = %d, %d, %v", ga, gb, err)
	}
	// Both opened and sized, one journal entry with both records, once
	// both links are made.
	check(t, c.calls, "open a", "open b", "exchange a b sizes 10 20", "made 101", "made 102", "append 2 files 1,101,102,2", "apply")
}

func TestExchangeHalfLinkedIsUndone(t *testing.T) {
	c, f := newFake(t)
	c.file(102, 0) // the second link's name is taken: the first goes
	_, _, err := f.Exchange(context.Background(), transfer.ObjectAttrs{Name: "a", Generation: 1}, transfer.ObjectAttrs{Name: "b", Generation: 2})
	if err == nil {
		t.Fatal("Exchange succeeded")
	}
	if _, err := os.Stat(c.path(101)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the first link is still there: %v", err)
	}
	if last := c.calls[len(c.calls)-1]; !strings.HasPrefix(last, "undo ") || slices.ContainsFunc(c.calls, func(s string) bool { return strings.HasPrefix(s, "append") }) {
		t.Errorf("calls %q, want an undo and no journal entry", c.calls)
	}
}
