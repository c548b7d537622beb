package send

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"github.com/bucketfs/bucketfs/transfer"
)

// fakeBucket answers Put and Copy, and records them; any other call
// panics (the embedded nil Bucket).
type fakeBucket struct {
	transfer.Bucket
	mu     sync.Mutex
	puts   map[string][]byte
	copies []string // "src#gen->dst"
}

func (b *fakeBucket) Put(ctx context.Context, name string, r io.Reader, o transfer.PutOptions) (transfer.ObjectAttrs, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return transfer.ObjectAttrs{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.puts == nil {
		b.puts = map[string][]byte{}
	}
	b.puts[name] = data
	return transfer.ObjectAttrs{Name: name, Generation: 1, Size: int64(len(data))}, nil
}

func (b *fakeBucket) Copy(ctx context.Context, src string, srcGen int64, dst string, o transfer.PutOptions) (transfer.ObjectAttrs, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.copies = append(b.copies, fmt.Sprintf("%s#%d->%s", src, srcGen, dst))
	return transfer.ObjectAttrs{Name: dst, Generation: 2}, nil
}

// fakeIndex keeps the staging records in memory; putErr fails PutStaging.
type fakeIndex struct {
	mu     sync.Mutex
	recs   map[string]durable.Staging
	putErr error
}

func newFakeIndex() *fakeIndex { return &fakeIndex{recs: map[string]durable.Staging{}} }

func (x *fakeIndex) PutStaging(staging, object string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.putErr != nil {
		return x.putErr
	}
	x.recs[staging] = durable.Staging{Object: object, Started: time.Now()}
	return nil
}

func (x *fakeIndex) DeleteStaging(staging string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.recs, staging)
	return nil
}

func (x *fakeIndex) LoadStaging() (map[string]durable.Staging, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := map[string]durable.Staging{}
	for k, v := range x.recs {
		out[k] = v
	}
	return out, nil
}

func (x *fakeIndex) has(staging string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, ok := x.recs[staging]
	return ok
}

func (x *fakeIndex) len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.recs)
}

// fakeLarge is a LargeUploader. Put checks, through onPut, what holds
// while the parts go; the first failClean calls of Clean fail.
type fakeLarge struct {
	mu        sync.Mutex
	onPut     func(staging string)
	put       map[string][]byte
	cleaned   []string
	failClean int
}

func (l *fakeLarge) Put(ctx context.Context, name string, r io.ReaderAt, size int64, o transfer.PutOptions, staging string) (transfer.ObjectAttrs, error) {
	if l.onPut != nil {
		l.onPut(staging)
	}
	data, err := io.ReadAll(io.NewSectionReader(r, 0, size))
	if err != nil {
		return transfer.ObjectAttrs{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.put == nil {
		l.put = map[string][]byte{}
	}
	l.put[name] = data
	return transfer.ObjectAttrs{Name: name, Generation: 3, Size: size}, nil
}

func (l *fakeLarge) Clean(ctx context.Context, staging string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failClean > 0 {
		l.failClean--
		return errors.New("deleting staged parts: refused")
	}
	l.cleaned = append(l.cleaned, staging)
	return nil
}

func (l *fakeLarge) cleanedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.cleaned)
}

// writeData writes data as the data file id in dir, longer than data so
// that only size bytes must be sent.
func writeData(t *testing.T, dir string, id uint64, data []byte) {
	t.Helper()
	if err := os.WriteFile(durable.DataPath(dir, id), append(bytes.Clone(data), "beyond the size"...), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newSender(t *testing.T, large LargeUploader, x Index) (*Sender, *fakeBucket, string) {
	t.Helper()
	dir := t.TempDir()
	b := &fakeBucket{}
	return New(Options{Bucket: b, Large: large, LargeThreshold: 1000, Index: x, DataDir: dir}), b, dir
}

// Send chooses: a file under the threshold in one request, one at it or
// above in parts (its staging prefix recorded and live while the parts
// go, cleaned and forgotten after), a copy by the bucket itself.
func TestSendChoosesHowToSend(t *testing.T) {
	ctx := testutil.Ctx(t, time.Minute)
	x := newFakeIndex()
	l := &fakeLarge{}
	s, b, dir := newSender(t, l, x)
	l.onPut = func(staging string) {
		if !strings.HasPrefix(staging, transfer.StagingPrefix) || !x.has(staging) || !s.isLive(staging) {
			t.Errorf("parts sent under %q: recorded %v, live %v; want a staging prefix, recorded and live", staging, x.has(staging), s.isLive(staging))
		}
	}
	small, large := testutil.Pattern(999, 1), testutil.Pattern(1000, 2)
	writeData(t, dir, 1, small)
	writeData(t, dir, 2, large)
	if _, err := s.Send(ctx, "small", 1, int64(len(small)), Source{}, transfer.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	a, err := s.Send(ctx, "large", 2, int64(len(large)), Source{}, transfer.PutOptions{})
	if err != nil || a.Generation != 3 {
		t.Fatalf("sending the large file: %+v, %v", a, err)
	}
	if _, err := s.Send(ctx, "copy", 0, 0, Source{From: "src", Gen: 7}, transfer.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.puts["small"], small) || len(b.puts) != 1 {
		t.Errorf("sent in one request: %d objects, small %d bytes; want small only, its %d bytes", len(b.puts), len(b.puts["small"]), len(small))
	}
	if !bytes.Equal(l.put["large"], large) || len(l.put) != 1 {
		t.Errorf("sent in parts: %d objects, large %d bytes; want large only, its %d bytes", len(l.put), len(l.put["large"]), len(large))
	}
	if len(b.copies) != 1 || b.copies[0] != "src#7->copy" {
		t.Errorf("copies made: %v, want src#7->copy", b.copies)
	}
	if l.cleanedCount() != 1 || x.len() != 0 || len(s.live) != 0 {
		t.Errorf("after the uploads: %d cleanups, %d staging records, %d live prefixes; want 1, 0, 0", l.cleanedCount(), x.len(), len(s.live))
	}
}

// A staging prefix that cannot be recorded sends no part.
func TestSendUnrecordedSendsNothing(t *testing.T) {
	ctx := testutil.Ctx(t, time.Minute)
	x := newFakeIndex()
	x.putErr = errors.New("disk full")
	l := &fakeLarge{}
	s, _, dir := newSender(t, l, x)
	writeData(t, dir, 1, testutil.Pattern(2000, 1))
	if _, err := s.Send(ctx, "large", 1, 2000, Source{}, transfer.PutOptions{}); !errors.Is(err, x.putErr) {
		t.Fatalf("Send = %v, want the index's error", err)
	}
	if len(l.put) != 0 || len(s.live) != 0 {
		t.Errorf("%d objects sent in parts, %d prefixes live; want none", len(l.put), len(s.live))
	}
}

// A cleanup that fails after an upload keeps the record and wakes the
// cleaner, which cleans it up.
func TestFailedCleanupLeftToCleaner(t *testing.T) {
	ctx := testutil.Ctx(t, time.Minute)
	x := newFakeIndex()
	l := &fakeLarge{failClean: 1}
	s, _, dir := newSender(t, l, x)
	writeData(t, dir, 1, testutil.Pattern(2000, 1))
	if _, err := s.Send(ctx, "large", 1, 2000, Source{}, transfer.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if x.len() != 1 {
		t.Fatalf("%d staging records after a failed cleanup, want 1", x.len())
	}
	life, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.RunCleaner(life)
	}()
	for x.len() > 0 {
		if ctx.Err() != nil {
			t.Fatal("the cleaner never cleaned up the record left")
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, bounded by ctx
	}
	stop()
	<-done
	if l.cleanedCount() != 1 {
		t.Errorf("%d cleanups made, want 1", l.cleanedCount())
	}
}

// CleanStaging cleans the prefixes left, never a running upload's, and
// says how many it could not clean.
func TestCleanStagingSkipsLive(t *testing.T) {
	ctx := testutil.Ctx(t, time.Minute)
	x := newFakeIndex()
	l := &fakeLarge{}
	s, _, _ := newSender(t, l, x)
	left, running := transfer.NewStaging(), transfer.NewStaging()
	for _, p := range []string{left, running} {
		if err := x.PutStaging(p, "obj"); err != nil {
			t.Fatal(err)
		}
	}
	s.setLive(running, true)
	if err := s.CleanStaging(ctx); err != nil {
		t.Fatal(err)
	}
	if x.has(left) || !x.has(running) || l.cleanedCount() != 1 {
		t.Errorf("after CleanStaging: left recorded %v, running recorded %v, %d cleanups; want false, true, 1", x.has(left), x.has(running), l.cleanedCount())
	}
	s.setLive(running, false)
	l.failClean = 1
	if err := s.CleanStaging(ctx); err == nil || !strings.Contains(err.Error(), "1 uploads'") {
		t.Errorf("CleanStaging with a failing cleanup = %v, want 1 left", err)
	}
	if err := s.CleanStaging(ctx); err != nil || x.len() != 0 {
		t.Errorf("CleanStaging again = %v with %d records left; want none", err, x.len())
	}
}

// Without a LargeUploader there is nothing to clean: the cleaner returns
// at once and CleanStaging does nothing. With one, the cleaner ends with
// its life.
func TestCleanerLifetime(t *testing.T) {
	ctx := testutil.Ctx(t, time.Minute)
	s, _, _ := newSender(t, nil, nil)
	s.RunCleaner(ctx) // returns at once
	if err := s.CleanStaging(ctx); err != nil {
		t.Fatal(err)
	}
	s, _, _ = newSender(t, &fakeLarge{}, newFakeIndex())
	life, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.RunCleaner(life)
	}()
	stop()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the cleaner did not end with its life")
	}
}

// BoltIndex keeps the records in the cache index's staging/ bucket.
func TestBoltIndex(t *testing.T) {
	db, err := durable.OpenIndex(filepath.Join(t.TempDir(), durable.IndexName), "b")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	x := BoltIndex(db)
	p := transfer.NewStaging()
	if err := x.PutStaging(p, "obj"); err != nil {
		t.Fatal(err)
	}
	recs, err := x.LoadStaging()
	if err != nil || len(recs) != 1 || recs[p].Object != "obj" {
		t.Fatalf("LoadStaging = %v, %v; want %s for obj", recs, err, p)
	}
	if err := x.DeleteStaging(p); err != nil {
		t.Fatal(err)
	}
	if recs, err := x.LoadStaging(); err != nil || len(recs) != 0 {
		t.Fatalf("after DeleteStaging LoadStaging = %v, %v; want none", recs, err)
	}
}
