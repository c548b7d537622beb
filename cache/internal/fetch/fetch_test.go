package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/read"
	"github.com/bucketfs/bucketfs/cache/internal/verify"
	"github.com/bucketfs/bucketfs/transfer"
)

const chunk = 4

// bucket serves data as every version of every object, or fails every
// read with err.
type bucket struct {
	transfer.Bucket // nil: only what a download calls is here
	data            []byte
	err             error
}

func (b *bucket) Name() string { return "b" }

func (b *bucket) ReadRange(ctx context.Context, name string, gen, off, n int64, w io.Writer) (int64, error) {
	if b.err != nil {
		return 0, b.err
	}
	got, err := w.Write(b.data[off : off+n])
	return int64(got), err
}

// ledger is a fake Ledger of one copy: its mu is the owner's lock, calls
// are the ledger calls in order.
type ledger struct {
	mu      sync.Mutex
	fl      *Fill
	rec     durable.Record
	checked verify.Checked
	held    bool // a handle holds the copy
	calls   []string
}

func (l *ledger) Ended(dl *transfer.Download) *os.File {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, "ended")
	if !l.fl.Ended(dl, !l.held) {
		return nil
	}
	_, f := l.fl.Take()
	Absorb(&l.rec, &l.checked, dl)
	return f
}

func (l *ledger) Unsynced(dl *transfer.Download) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, "unsynced")
	return nil
}

func (l *ledger) Failed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, "failed: "+err.Error())
}

func (l *ledger) Retired(dl *transfer.Download) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, "retired")
	Absorb(&l.rec, &l.checked, dl)
	return nil
}

func (l *ledger) log() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// setup makes a fetcher over b and the empty data file of a copy of size
// bytes, recorded with rec's chunk size.
func setup(t *testing.T, b *bucket, size int64) (*Fetcher, *sync.WaitGroup, string, durable.Record) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	wg := &sync.WaitGroup{}
	fe := &Fetcher{Bucket: b, ChunkSize: chunk, Parallelism: 2, Log: slog.New(slog.DiscardHandler), WG: wg}
	return fe, wg, path, durable.Record{Generation: 7, Size: size, ChunkSize: chunk}
}

// A walk that fetches everything is retired unheld: its file synced and
// closed, then what it fetched recorded, every chunk checked.
func TestWalkRetiresAndRecords(t *testing.T) {
	data := []byte("0123456789ab")
	b := &bucket{data: data}
	fe, wg, path, rec := setup(t, b, int64(len(data)))
	var fl Fill
	l := &ledger{fl: &fl, rec: rec}
	l.mu.Lock()
	if err := fe.Make(&fl, path, "o", &l.rec, &l.checked); err != nil {
		t.Fatal(err)
	}
	if !fl.Idle() || fl.Walking() {
		t.Fatal("a download not started must count as idle")
	}
	dl := fl.Download()
	fe.Walk(&fl, transfer.FetchWhole, l, "o")
	fe.Walk(&fl, transfer.FetchWarm, l, "o") // started once
	l.mu.Unlock()
	wg.Wait()
	if got := l.log(); !slices.Equal(got, []string{"ended", "retired"}) {
		t.Fatalf("ledger calls = %q; want ended, retired", got)
	}
	if fl.Download() != nil {
		t.Error("the retired download is still the fill's")
	}
	if !slices.Equal(l.rec.PresentBools(), []bool{true, true, true}) || !slices.Equal(l.checked, verify.AllOf(3)) {
		t.Errorf("recorded present %v, checked %v; want every chunk", l.rec.PresentBools(), l.checked)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Errorf("data file = %q; want %q", got, data)
	}
	if s := fe.Fetched(); s.Whole != int64(len(data)) || s.Warm != 0 {
		t.Errorf("fetched = %+v; want %d whole", s, len(data))
	}
	if !dl.Started() {
		t.Error("the walk did not start")
	}
}

// A walk that fails while a handle holds the copy is not retired: the
// download stays, idle, for the last release; the failure is noted.
func TestWalkFailedHeldStays(t *testing.T) {
	b := &bucket{err: fmt.Errorf("read: %w", transfer.ErrNotExist)}
	fe, wg, path, rec := setup(t, b, 8)
	var fl Fill
	l := &ledger{fl: &fl, rec: rec, held: true}
	l.mu.Lock()
	if err := fe.Make(&fl, path, "o", &l.rec, &l.checked); err != nil {
		t.Fatal(err)
	}
	fe.Walk(&fl, transfer.FetchWhole, l, "o")
	l.mu.Unlock()
	wg.Wait()
	got := l.log()
	if len(got) != 2 || got[0] != "ended" || got[1] != "failed: read: "+transfer.ErrNotExist.Error() {
		t.Fatalf("ledger calls = %q; want ended, failed", got)
	}
	if fl.Download() == nil || !fl.Idle() || fl.Complete() {
		t.Fatal("a held download whose walk failed must stay, idle, incomplete")
	}
	dl, f := fl.Take()
	dl.Stop()
	f.Close()
}

// Only synced chunks are ever recorded: a file whose sync fails records
// nothing.
func TestRetireSyncFailedRecordsNothing(t *testing.T) {
	b := &bucket{data: []byte("01234567")}
	fe, _, path, rec := setup(t, b, 8)
	var fl Fill
	l := &ledger{fl: &fl, rec: rec}
	if err := fe.Make(&fl, path, "o", &l.rec, &l.checked); err != nil {
		t.Fatal(err)
	}
	dl, f := fl.Take()
	if err := dl.EnsureComplete(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.Close() // its Sync fails
	fe.Retire(l, "o", dl, f)
	if got := l.log(); !slices.Equal(got, []string{"unsynced"}) {
		t.Fatalf("ledger calls = %q; want unsynced alone", got)
	}
}

// Make: never for a complete copy or local changes; a pending copy reads
// its source; a changed chunk size fetches everything again.
func TestMake(t *testing.T) {
	fe, _, path, rec := setup(t, &bucket{data: make([]byte, 8)}, 8)
	var fl Fill
	var checked verify.Checked
	for _, r := range []durable.Record{{Size: 8, Complete: true}, {Size: 8, Dirty: true}} {
		if err := fe.Make(&fl, path, "o", &r, &checked); err == nil || fl.Download() != nil {
			t.Fatalf("Make of %+v = %v; want an error, no download", r, err)
		}
	}
	rec.ChunkSize = 2
	rec.Dirty, rec.CopyFrom, rec.CopyGen = true, "src", 3
	rec.SetPresent([]bool{true, false, true, true})
	checked = verify.AllOf(4)
	if err := fe.Make(&fl, path, "o", &rec, &checked); err != nil {
		t.Fatal(err)
	}
	defer fl.Download().Stop()
	if src, gen := fl.Source(); src != "src" || gen != 3 {
		t.Errorf("Source = %s#%d; want src#3", src, gen)
	}
	if rec.ChunkSize != chunk || checked != nil || slices.Contains(fl.Download().Present(), true) {
		t.Errorf("after a chunk size change: chunk %d, checked %v, present %v; want %d, none, none",
			rec.ChunkSize, checked, fl.Download().Present(), chunk)
	}
	if slices.Contains(rec.PresentBools(), true) || rec.Complete {
		t.Errorf("after a chunk size change the record says present %v (complete %v), in the old chunks' units; want none",
			rec.PresentBools(), rec.Complete)
	}
}

// A copy made by a prefetch counts once: used by the first open that is
// not a prefetch, or wasted if it leaves first.
func TestPrefetchedCounts(t *testing.T) {
	pf := ForPrefetch(context.Background())
	var fl Fill
	fl.Made(pf)
	if fl.Used(pf, 10) != 0 || fl.Used(context.Background(), 10) != 10 || fl.Used(context.Background(), 10) != 0 || fl.Wasted(10) != 0 {
		t.Error("a prefetched copy opened must count as used once, never as wasted")
	}
	fl.Made(pf)
	if fl.Wasted(10) != 10 || fl.Wasted(10) != 0 {
		t.Error("a prefetched copy that leaves unopened must count as wasted once")
	}
	fl.Made(context.Background())
	if fl.Used(context.Background(), 10) != 0 || fl.Wasted(10) != 0 {
		t.Error("a copy an open made is no prefetch's")
	}
}

type discard struct{}

func (discard) WriteAt(p []byte, off int64) (int, error) { return len(p), nil }

// prefetcher is a fake Prefetcher: entries are names.
type prefetcher struct {
	known   bool
	acquire error
	created bool
	dl      *transfer.Download
	calls   []string
}

func (p *prefetcher) Known(name string) bool { p.calls = append(p.calls, "known"); return p.known }
func (p *prefetcher) Acquire(ctx context.Context, a transfer.ObjectAttrs) (string, bool, error) {
	if !Prefetching(ctx) {
		panic("a prefetch's acquire must be marked")
	}
	p.calls = append(p.calls, "acquire")
	return a.Name, p.created, p.acquire
}
func (p *prefetcher) Release(e string) { p.calls = append(p.calls, "release") }
func (p *prefetcher) Start(e string) (*transfer.Download, error) {
	p.calls = append(p.calls, "start")
	return p.dl, nil
}
func (p *prefetcher) Failed(e string, stale bool) {
	p.calls = append(p.calls, fmt.Sprint("failed stale=", stale))
}

func TestPrefetchSequence(t *testing.T) {
	a := transfer.ObjectAttrs{Name: "o", Size: 8, Generation: 7}
	download := func(b *bucket) *transfer.Download {
		return transfer.NewDownload(b, "o", 7, 8, discard{}, nil, transfer.DownloadOptions{ChunkSize: 8, Parallelism: 1})
	}
	for _, tc := range []struct {
		name    string
		p       *prefetcher
		a       transfer.ObjectAttrs
		fetched bool
		err     error
		calls   []string
	}{
		{"known", &prefetcher{known: true}, a, false, nil, []string{"known"}},
		{"empty", &prefetcher{}, transfer.ObjectAttrs{Name: "o", Generation: 7}, false, nil, []string{"known"}},
		{"no room", &prefetcher{acquire: fmt.Errorf("x: %w", ErrNoRoom)}, a, false, nil, []string{"known", "acquire"}},
		{"failed acquire", &prefetcher{acquire: io.ErrUnexpectedEOF}, a, false, io.ErrUnexpectedEOF, []string{"known", "acquire"}},
		{"made by an open", &prefetcher{}, a, false, nil, []string{"known", "acquire", "release"}},
		{"nothing to fetch", &prefetcher{created: true}, a, false, nil, []string{"known", "acquire", "start", "release"}},
		{"fetched", &prefetcher{created: true, dl: download(&bucket{data: make([]byte, 8)})}, a, true, nil,
			[]string{"known", "acquire", "start", "release"}},
		{"stale", &prefetcher{created: true, dl: download(&bucket{err: transfer.ErrNotExist})}, a, false, read.ErrStale,
			[]string{"known", "acquire", "start", "failed stale=true", "release"}},
	} {
		fetched, err := Prefetch(context.Background(), tc.p, tc.a)
		if fetched != tc.fetched || !errors.Is(err, tc.err) || (tc.err == nil && err != nil) || !slices.Equal(tc.p.calls, tc.calls) {
			t.Errorf("%s: Prefetch = %v, %v, calls %q; want %v, %v, %q", tc.name, fetched, err, tc.p.calls, tc.fetched, tc.err, tc.calls)
		}
		if tc.p.dl != nil {
			tc.p.dl.Stop()
		}
	}
}

// The end of a walk whose download is no longer the fill's (taken, and
// another made since) changes nothing of the new one: still walking, so
// that the last release does not stop it and Status counts it.
func TestEndedOfAnOldDownload(t *testing.T) {
	b := &bucket{data: []byte("0123456789ab")}
	fe, _, path, rec := setup(t, b, 12)
	var fl Fill
	var checked verify.Checked
	if err := fe.Make(&fl, path, "o", &rec, &checked); err != nil {
		t.Fatal(err)
	}
	old, f := fl.Take()
	f.Close()
	if err := fe.Make(&fl, path, "o", &rec, &checked); err != nil {
		t.Fatal(err)
	}
	fl.idle = false // its walk runs
	if fl.Ended(old, true) {
		t.Error("the old download is to be retired, though it is not the fill's")
	}
	if !fl.Walking() {
		t.Error("the end of the old download's walk marked the new one's walk ended")
	}
	_, f = fl.Take()
	f.Close()
}
