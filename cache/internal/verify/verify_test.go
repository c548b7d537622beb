package verify

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/transfer"
)

const chunk = 8

// fakeLedger is one entry as the tests set it up: a copy of chunks of
// chunk bytes with the sums of sums, and answers chosen by the test. It
// records each call.
type fakeLedger struct {
	mu       sync.Mutex
	calls    []string
	state    State
	sums     []uint32
	checked  Checked
	current  bool // what Settle reports
	trust    bool
	held     bool            // what Hold reports
	unchange bool            // what DropHeld reports
	wg       *sync.WaitGroup // the Checker's, which StartCheck adds to
}

func (l *fakeLedger) add(format string, args ...any) {
	l.mu.Lock()
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *fakeLedger) trail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.calls, "; ")
}

func (l *fakeLedger) State() State {
	l.add("State")
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state
	s.AllChecked = len(l.checked) == len(l.sums) && !slices.Contains(l.checked, false)
	return s
}

func (l *fakeLedger) Span(first, last int) Span {
	l.add("Span %d-%d", first, last)
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Span{First: first, Clean: l.state.Clean, Held: l.state.Held != "", ChunkSize: chunk, Size: l.state.Size, Version: 7}
	for i := first; i <= last; i++ {
		s.Chunks = append(s.Chunks, Chunk{Checked: l.checked.Has(i), HasSum: true, Sum: l.sums[i], Present: true})
	}
	return s
}

func (l *fakeLedger) Settle(s Span, checked []int) (bool, bool) {
	l.add("Settle %v", checked)
	if l.current {
		l.mu.Lock()
		for _, i := range checked {
			l.checked.Set(i, len(l.sums), true)
		}
		l.mu.Unlock()
	}
	return l.current, l.trust
}

func (l *fakeLedger) Drop(bad []int, why error) { l.add("Drop %v", bad) }
func (l *fakeLedger) Hold(bad []int, why error) bool {
	l.add("Hold %v", bad)
	return l.held
}

func (l *fakeLedger) StartCheck(done chan struct{}) (<-chan struct{}, string, uint64, int) {
	l.add("StartCheck")
	l.wg.Add(1)
	return done, l.state.Name, l.state.ID, l.state.Chunks
}

func (l *fakeLedger) EndCheck() { l.add("EndCheck") }
func (l *fakeLedger) Release()  { l.add("Release") }

func (l *fakeLedger) DropHeld(name string, id, version uint64) bool {
	l.add("DropHeld %s %x %d", name, id, version)
	return l.unchange
}

func (l *fakeLedger) Confirm(name string, a transfer.ObjectAttrs, deleted bool) {
	l.add("Confirm %s %d %v", name, a.Generation, deleted)
}

// copyOf writes data as data file id under dir/data and returns a
// ledger of a clean, complete copy of it, its sums those of good (data
// before any damage).
func copyOf(t *testing.T, dir string, id uint64, good, data []byte) (*fakeLedger, *os.File) {
	t.Helper()
	p := durable.DataPath(filepath.Join(dir, "data"), id)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	l := &fakeLedger{current: true, state: State{Name: "obj", Clean: true, Complete: true, Size: int64(len(good)), ID: id}}
	for off := 0; off < len(good); off += chunk {
		l.sums = append(l.sums, crc32.Checksum(good[off:min(off+chunk, len(good))], crc32.MakeTable(crc32.Castagnoli)))
	}
	l.state.Chunks = len(l.sums)
	return l, f
}

var sound = []byte("0123456789abcdefghijklmnopqrstuv") // four chunks

// damaged is sound with chunk 2 changed.
func damaged() []byte {
	d := slices.Clone(sound)
	d[2*chunk+3] = 'X'
	return d
}

// Each rule of plan: what is served as it is, what is checked first.
func TestPlan(t *testing.T) {
	s := Span{First: 4, Clean: true, Chunks: []Chunk{
		{Checked: true},
		{HasSum: true, Sum: 9},
		{Present: true},  // a copy from before sums were kept
		{Present: false}, // dropped as bad: from the bucket
	}}
	good, todo := plan(s)
	if want := []bool{true, false, true, false}; !slices.Equal(good, want) || len(todo) != 1 || todo[0].I != 5 || todo[0].Sum != 9 {
		t.Errorf("clean: good %v todo %v, want %v and chunk 5", good, todo, want)
	}
	s = Span{Chunks: []Chunk{{Present: true}}}
	if good, _ := plan(s); !good[0] {
		t.Error("a chunk written here is not served")
	}
	s.Held = true
	if good, _ := plan(s); good[0] {
		t.Error("a held file's chunk without a sum is served")
	}
}

// A clean copy's bad chunk is dropped, the good ones settled as
// checked, and a second check reads nothing.
func TestChunksDropBadCleanChunk(t *testing.T) {
	l, f := copyOf(t, t.TempDir(), 1, sound, damaged())
	good := Chunks(l, f, 0, 3)
	if want := []bool{true, true, false, true}; !slices.Equal(good, want) {
		t.Errorf("good = %v, want %v", good, want)
	}
	if got, want := l.trail(), "Span 0-3; Settle [0 1 3]; Drop [2]"; got != want {
		t.Errorf("calls: %s\nwant:  %s", got, want)
	}
	l.calls = nil
	if good := Chunks(l, f, 1, 1); !good[0] || l.trail() != "Span 1-1" {
		t.Errorf("a checked chunk: good %v, calls %s; want served with no check", good, l.trail())
	}
}

// A changed file's bad chunk holds it; if the hold finds it written
// since, the chunk is served after all.
func TestChunksHoldChangedFile(t *testing.T) {
	for _, held := range []bool{true, false} {
		l, f := copyOf(t, t.TempDir(), 1, sound, damaged())
		l.state.Clean, l.held = false, held
		good := Chunks(l, f, 2, 3)
		if !slices.Equal(good, []bool{!held, true}) || l.trail() != "Span 2-3; Settle [3]; Hold [2]" {
			t.Errorf("held %v: good %v, calls %s", held, good, l.trail())
		}
	}
}

// A file written while it was read: nothing is dropped or held; a
// changed file (trust) is served whole, a clean copy's bad chunk is not.
func TestChunksWrittenMeanwhile(t *testing.T) {
	for _, trust := range []bool{true, false} {
		l, f := copyOf(t, t.TempDir(), 1, sound, damaged())
		l.current, l.trust = false, trust
		good := Chunks(l, f, 2, 2)
		if good[0] != trust || l.trail() != "Span 2-2; Settle []" {
			t.Errorf("trust %v: good %v, calls %s", trust, good, l.trail())
		}
	}
}

// A read of a clean copy's bad chunk answers ErrBadCopy; of a held
// file's, ErrDamaged.
func TestRead(t *testing.T) {
	l, f := copyOf(t, t.TempDir(), 1, sound, damaged())
	if err := Read(l, f, 0, 1); err != nil {
		t.Errorf("a sound read: %v", err)
	}
	if err := Read(l, f, 2, 2); !errors.Is(err, ErrBadCopy) {
		t.Errorf("a bad chunk of a clean copy: %v, want ErrBadCopy", err)
	}
	l.state.Held = "bad"
	if err := Read(l, f, 2, 2); !errors.Is(err, ErrDamaged) {
		t.Errorf("a held file: %v, want ErrDamaged", err)
	}
}

func checker(dir string) (*Checker, *sync.WaitGroup) {
	var wg sync.WaitGroup
	return New(Checker{
		SyncMax: SyncMax, Wait: Wait, Dir: dir, DataDir: filepath.Join(dir, "data"),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Closing: make(chan struct{}), WG: &wg,
	}), &wg
}

// A copy longer than its record is cut back and dropped whole.
func TestAtOpenWrongSize(t *testing.T) {
	dir := t.TempDir()
	l, _ := copyOf(t, dir, 1, sound, append(slices.Clone(sound), "more"...))
	f, err := os.OpenFile(durable.DataPath(filepath.Join(dir, "data"), 1), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	k, _ := checker(dir)
	k.AtOpen(l, f)
	if st, _ := f.Stat(); st.Size() != int64(len(sound)) {
		t.Errorf("the file has %d bytes, want %d", st.Size(), len(sound))
	}
	if got := l.trail(); !strings.HasPrefix(got, "State; Drop [0 1 2 3]; State") {
		t.Errorf("calls: %s", got)
	}
}

// A large copy is checked in the background, the entry held from
// StartCheck to Release, a chunk at a time; the open waits for it.
func TestAtOpenLargeInBackground(t *testing.T) {
	dir := t.TempDir()
	l, f := copyOf(t, dir, 1, sound, sound)
	k, wg := checker(dir)
	k.SyncMax = 0
	l.wg = wg
	if k.AtOpen(l, f) {
		t.Error("pending after the check ended")
	}
	wg.Wait()
	want := "State; State; StartCheck; Span 0-0; Settle [0]; Span 1-1; Settle [1]; Span 2-2; Settle [2]; Span 3-3; Settle [3]; EndCheck; Release"
	// The open's last look may come before Release: done is closed first.
	if got := l.trail(); got != want+"; State" && got != strings.Replace(want, "Release", "State; Release", 1) {
		t.Errorf("calls: %s\nwant:  %s; State", got, want)
	}
}

// A held file is refused before any file is opened; a clean copy not
// checked yet is checked whole; one emptied first is not.
func TestBeforeWrite(t *testing.T) {
	dir := t.TempDir()
	l, _ := copyOf(t, dir, 1, sound, sound)
	k, _ := checker(dir)
	if err := k.BeforeWrite(l, true); err != nil || l.trail() != "State" {
		t.Errorf("emptied first: %v, calls %s", err, l.trail())
	}
	l.calls = nil
	if err := k.BeforeWrite(l, false); err != nil || l.trail() != "State; State; Span 0-3; Settle [0 1 2 3]" {
		t.Errorf("a clean copy: %v, calls %s", err, l.trail())
	}
	l.calls, l.state.Held = nil, "bad"
	if err := k.BeforeWrite(l, false); !errors.Is(err, ErrDamaged) || l.trail() != "State" {
		t.Errorf("a held file: %v, calls %s", err, l.trail())
	}
}

type stater struct{ err error }

func (s stater) Stat(ctx context.Context, name string) (transfer.ObjectAttrs, error) {
	return transfer.ObjectAttrs{Name: name, Generation: 5}, s.err
}

// The bucket's version is taken only once the local bytes are in
// lost+found, and only if nothing changed meanwhile; then what the name
// shows is confirmed.
func TestTakeBucket(t *testing.T) {
	for _, tt := range []struct {
		unchanged bool
		stat      error
		calls     string
	}{
		{true, nil, "DropHeld obj 1 3; Confirm obj 5 false"},
		{true, transfer.ErrNotExist, "DropHeld obj 1 3; Confirm obj 0 true"},
		{false, nil, "DropHeld obj 1 3"},
	} {
		dir := t.TempDir()
		l, _ := copyOf(t, dir, 1, sound, sound)
		l.unchange = tt.unchanged
		k, _ := checker(dir)
		k.Bucket = stater{tt.stat}
		saved, err := k.TakeBucket(context.Background(), l, "obj", 1, 3)
		if (err == nil) != tt.unchanged || l.trail() != tt.calls {
			t.Errorf("unchanged %v: %v, calls %s; want %s", tt.unchanged, err, l.trail(), tt.calls)
		}
		if b, err := os.ReadFile(saved); err != nil || string(b) != string(sound) {
			t.Errorf("lost+found has %q (%v), want the local bytes", b, err)
		}
	}
}
