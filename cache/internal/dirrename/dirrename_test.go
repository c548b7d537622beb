package dirrename

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/bucketfs/bucketfs/cache/internal/folders"
	"github.com/bucketfs/bucketfs/transfer"
)

// fake is a bucket (its objects, moved by a folder rename), its folder
// calls and the cache's ledger, recording every call in order.
type fake struct {
	mu      sync.Mutex
	calls   []string
	objects []transfer.ObjectAttrs

	flat      bool
	folderErr error
	renamed   bool     // the folder call moves the objects
	freezeOK  bool     // Freeze says yes
	wait      []bool   // per try: Plan says an entry is being made
	builds    []bool   // per try: Build finds the plan holding (default true)
	writeErr  error    // Write fails
	forgotten []string // the moved names Forget was given, sorted; "nil" for none
	waitCh    chan struct{}
}

func (f *fake) add(format string, args ...any) {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *fake) trail() string { return strings.Join(f.calls, " ") }

func (f *fake) List(ctx context.Context, q transfer.ListQuery) (transfer.ListPage, error) {
	f.add("List(%s)", q.Prefix)
	var page transfer.ListPage
	for _, a := range f.objects {
		if strings.HasPrefix(a.Name, q.Prefix) {
			page.Objects = append(page.Objects, a)
		}
	}
	return page, nil
}

func (f *fake) Flat() bool { return f.flat }

func (f *fake) Rename(ctx context.Context, from, to string) (bool, error) {
	f.add("Folder(%s,%s)", from, to)
	if f.folderErr != nil || !f.renamed {
		return false, f.folderErr
	}
	for i, a := range f.objects {
		if strings.HasPrefix(a.Name, from) {
			f.objects[i].Name = to + a.Name[len(from):]
			f.objects[i].Generation++
		}
	}
	return true, nil
}

func (f *fake) Quiesce(ctx context.Context, from, to string) error {
	f.add("Quiesce")
	return nil
}

func (f *fake) Unquiesce(from, to string) { f.add("Unquiesce") }

func (f *fake) Freeze(from, to string) ([]string, bool) {
	f.add("Freeze")
	return []string{"checked"}, f.freezeOK
}

func (f *fake) Forget(from, to string, checked []string, moved map[string]folders.Moved) {
	f.add("Forget")
	f.forgotten = []string{"nil"}
	if moved != nil {
		f.forgotten = nil
		for name := range moved {
			f.forgotten = append(f.forgotten, name)
		}
		sort.Strings(f.forgotten)
	}
}

func (f *fake) Thaw(from, to string) { f.add("Thaw") }

func (f *fake) Plan(from, to string, remote, remoteTo []transfer.ObjectAttrs) (Try, <-chan struct{}) {
	f.add("Plan(%d,%d)", len(remote), len(remoteTo))
	try := len(f.wait) > 0 && f.wait[0]
	if len(f.wait) > 0 {
		f.wait = f.wait[1:]
	}
	if try {
		return fakeTry{f}, f.waitCh
	}
	return fakeTry{f}, nil
}

// fakeTry is the fake's Try.
type fakeTry struct{ f *fake }

func (t fakeTry) Prepare() error { t.f.add("Prepare"); return nil }

func (t fakeTry) Build() bool {
	t.f.add("Build")
	ok := len(t.f.builds) == 0 || t.f.builds[0]
	if len(t.f.builds) > 0 {
		t.f.builds = t.f.builds[1:]
	}
	return ok
}

func (t fakeTry) Write() error   { t.f.add("Write"); return t.f.writeErr }
func (t fakeTry) Undo(err error) { t.f.add("Undo(%v)", err) }
func (t fakeTry) Apply()         { t.f.add("Apply") }

func (f *fake) flow() Flow[string] {
	return Flow[string]{Ledger: f, Bucket: f, Folders: f, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		AfterPlan: func(from string) { f.add("AfterPlan(%s)", from) }}
}

func objects(names ...string) []transfer.ObjectAttrs {
	var out []transfer.ObjectAttrs
	for _, n := range names {
		out = append(out, transfer.ObjectAttrs{Name: n, Generation: 1, Size: 3, CRC32C: 7})
	}
	return out
}

// TestRenameByCopies: in a bucket with no folders, one try in order:
// quiesced, both prefixes listed, planned, files before the build, the
// journal entry, applied, unquiesced.
func TestRenameByCopies(t *testing.T) {
	f := &fake{flat: true, objects: objects("d/a", "d/b")}
	moved, err := f.flow().Rename(context.Background(), "d/", "e/")
	if err != nil || moved != nil {
		t.Fatalf("Rename = %v, %v; want nil, nil", moved, err)
	}
	want := "Quiesce List(d/) List(e/) Plan(2,0) Prepare AfterPlan(d/) Build Write Apply Unquiesce"
	if got := f.trail(); got != want {
		t.Errorf("calls\n%s\nwant\n%s", got, want)
	}
}

// TestRenameReplans: a plan that no longer holds at its build is made
// again, each try quiesced and listed anew; after maxTries, ErrBusy.
func TestRenameReplans(t *testing.T) {
	f := &fake{flat: true, objects: objects("d/a"), builds: []bool{false, true}}
	if _, err := f.flow().Rename(context.Background(), "d/", "e/"); err != nil {
		t.Fatal(err)
	}
	try := "Quiesce List(d/) List(e/) Plan(1,0) Prepare AfterPlan(d/) Build"
	want := try + " Unquiesce " + try + " Write Apply Unquiesce"
	if got := f.trail(); got != want {
		t.Errorf("calls\n%s\nwant\n%s", got, want)
	}

	f = &fake{flat: true, objects: objects("d/a"), builds: make([]bool, maxTries)}
	if _, err := f.flow().Rename(context.Background(), "d/", "e/"); !errors.Is(err, ErrBusy) {
		t.Fatalf("Rename = %v, want ErrBusy", err)
	}
	if n := strings.Count(f.trail(), "Build"); n != maxTries || strings.Contains(f.trail(), "Write") {
		t.Errorf("%d builds and a write in %s; want %d builds, no write", n, f.trail(), maxTries)
	}
}

// TestRenameWaitsForAnEntryBeingMade: a plan that found an entry being
// made waits for it and plans again, with no file made meanwhile.
func TestRenameWaitsForAnEntryBeingMade(t *testing.T) {
	f := &fake{flat: true, wait: []bool{true}, waitCh: make(chan struct{})}
	close(f.waitCh)
	if _, err := f.flow().Rename(context.Background(), "d/", "e/"); err != nil {
		t.Fatal(err)
	}
	want := "Quiesce List(d/) List(e/) Plan(0,0) Unquiesce Quiesce List(d/) List(e/) Plan(0,0) Prepare AfterPlan(d/) Build Write Apply Unquiesce"
	if got := f.trail(); got != want {
		t.Errorf("calls\n%s\nwant\n%s", got, want)
	}

	f = &fake{flat: true, wait: []bool{true}, waitCh: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.flow().Rename(ctx, "d/", "e/"); !errors.Is(err, context.Canceled) {
		t.Errorf("Rename with its context ended while waiting = %v", err)
	}
}

// TestRenameJournalRefused: a journal entry refused is undone, with its
// error, and not applied.
func TestRenameJournalRefused(t *testing.T) {
	f := &fake{flat: true, writeErr: errors.New("disk full")}
	if _, err := f.flow().Rename(context.Background(), "d/", "e/"); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Rename = %v, want the journal's error", err)
	}
	if got, want := f.trail(), "Build Write Undo(disk full) Unquiesce"; !strings.HasSuffix(got, want) {
		t.Errorf("calls\n%s\nwant them to end\n%s", got, want)
	}
}

// TestRenameFolder: where the bucket renames folders and the cache
// agrees (Freeze), the folder moves, no copy is planned, the copies
// checked are settled with what moved before the names thaw.
func TestRenameFolder(t *testing.T) {
	f := &fake{freezeOK: true, renamed: true, objects: objects("d/a", "d/b", "x")}
	moved, err := f.flow().Rename(context.Background(), "d/", "e/")
	if err != nil || len(moved) != 2 {
		t.Fatalf("Rename = %v, %v; want e/a and e/b", moved, err)
	}
	want := "Quiesce List(d/) List(e/) Freeze Folder(d/,e/) List(e/) Forget Thaw Unquiesce"
	if got := f.trail(); got != want {
		t.Errorf("calls\n%s\nwant\n%s", got, want)
	}
	if got := strings.Join(f.forgotten, ","); got != "e/a,e/b" {
		t.Errorf("Forget was given %s, want e/a,e/b", got)
	}
}

// TestRenameFolderNotMade: a folder rename is not tried onto objects or
// without the cache's consent; one the bucket did not make is made by
// copies; one whose answer was lost drops the copies checked and fails,
// with no copy made.
func TestRenameFolderNotMade(t *testing.T) {
	f := &fake{freezeOK: true, renamed: true, objects: objects("d/a", "e/b")}
	f.flow().Rename(context.Background(), "d/", "e/")
	if strings.Contains(f.trail(), "Freeze") || !strings.Contains(f.trail(), "Apply") {
		t.Errorf("onto objects: %s", f.trail())
	}

	f = &fake{objects: objects("d/a")}
	f.flow().Rename(context.Background(), "d/", "e/")
	if strings.Contains(f.trail(), "Folder") || !strings.Contains(f.trail(), "Freeze Plan") {
		t.Errorf("refused by the cache: %s", f.trail())
	}

	f = &fake{freezeOK: true, objects: objects("d/a")}
	f.flow().Rename(context.Background(), "d/", "e/")
	if !strings.Contains(f.trail(), "Folder(d/,e/) Thaw Plan") {
		t.Errorf("not renamed by the bucket: %s", f.trail())
	}

	f = &fake{freezeOK: true, folderErr: errors.New("lost"), objects: objects("d/a")}
	if _, err := f.flow().Rename(context.Background(), "d/", "e/"); err == nil {
		t.Error("a folder rename whose answer was lost succeeded")
	}
	if got, want := f.trail(), "Freeze Folder(d/,e/) Forget Thaw Unquiesce"; !strings.HasSuffix(got, want) || f.forgotten[0] != "nil" {
		t.Errorf("calls\n%s (forgot %v)\nwant them to end\n%s, every copy dropped", got, f.forgotten, want)
	}
}

// TestRenameRefusesBadPrefixes: prefixes must end in '/', and the target
// may not be under the source; nothing is asked then.
func TestRenameRefusesBadPrefixes(t *testing.T) {
	for _, p := range [][2]string{{"d", "e/"}, {"d/", "e"}, {"d/", "d/e/"}} {
		f := &fake{flat: true}
		if _, err := f.flow().Rename(context.Background(), p[0], p[1]); !errors.Is(err, os.ErrInvalid) || len(f.calls) > 0 {
			t.Errorf("Rename(%q, %q) = %v after %s", p[0], p[1], err, f.trail())
		}
	}
}
