package upload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/folders"
	"github.com/bucketfs/bucketfs/cache/internal/integrity"
	"github.com/bucketfs/bucketfs/cache/internal/objmeta"
	"github.com/bucketfs/bucketfs/cache/internal/send"
	"github.com/bucketfs/bucketfs/transfer"
)

// trail is the calls a test's flow made, to the ledger and to the
// bucket, in order.
type trail struct {
	mu    sync.Mutex
	calls []string
}

func (t *trail) add(format string, args ...any) {
	t.mu.Lock()
	t.calls = append(t.calls, fmt.Sprintf(format, args...))
	t.mu.Unlock()
}

func (t *trail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.calls, "\n")
}

// index is where call begins in the trail, or -1.
func (t *trail) index(prefix string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.IndexFunc(t.calls, func(c string) bool { return strings.HasPrefix(c, prefix) })
}

// fakeEntry is the state a fakeLedger keeps of the one entry a test
// sends.
type fakeEntry struct {
	attempts []string
	savingAs string
}

// fakeLedger records each call, keeps the entry's tries as the cache
// would, and settles nothing.
type fakeLedger struct {
	t       *trail
	mu      sync.Mutex
	e       *fakeEntry
	settled bool // what Conflict reports
}

func (l *fakeLedger) Tries(u Job[*fakeEntry]) Tries {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.add("Tries")
	return Tries{Attempts: slices.Clone(u.Entry.attempts), SavingAs: u.Entry.savingAs}
}

func (l *fakeLedger) Hold(u Job[*fakeEntry], bad []int, why error) bool {
	l.t.add("Hold %v", bad)
	return true
}

func (l *fakeLedger) Stop(ctx context.Context, u Job[*fakeEntry], err error) {
	l.t.add("Stop %v", err)
}

func (l *fakeLedger) Rebase(u Job[*fakeEntry], gen int64) { l.t.add("Rebase %d->%d", u.Base, gen) }

func (l *fakeLedger) Requeue(u Job[*fakeEntry], gen int64) { l.t.add("Requeue %d->%d", u.Base, gen) }

func (l *fakeLedger) RecordAttempt(u Job[*fakeEntry], id, copyAs string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !slices.Contains(u.Entry.attempts, id) {
		u.Entry.attempts = append(u.Entry.attempts, id)
	}
	if copyAs != "" {
		u.Entry.savingAs = copyAs
	}
	l.t.add("RecordAttempt %s %s", id, copyAs)
	return nil
}

func (l *fakeLedger) Superseded(u Job[*fakeEntry], a transfer.ObjectAttrs, err error) bool {
	l.t.add("Superseded")
	return false
}

func (l *fakeLedger) Done(ctx context.Context, u Job[*fakeEntry], body integrity.FileSums, attrs transfer.ObjectAttrs, err error) {
	l.t.add("Done %d %v", attrs.Generation, err)
}

func (l *fakeLedger) Conflict(u Job[*fakeEntry], sibling string) bool {
	l.t.add("Conflict %s", sibling)
	return l.settled
}

func (l *fakeLedger) Uploaded(u Job[*fakeEntry]) { l.t.add("Uploaded %d", u.Seq) }

func (l *fakeLedger) SourceGone(u Job[*fakeEntry], now string) { l.t.add("SourceGone %s", now) }

func (l *fakeLedger) ForgetCopy(u Job[*fakeEntry]) { l.t.add("ForgetCopy %s", u.Name) }

func (l *fakeLedger) Deleted(ctx context.Context, u Job[*fakeEntry], err error, gone bool) {
	l.t.add("Deleted %v %v", err, gone)
}

func (l *fakeLedger) Patched(ctx context.Context, u Job[*fakeEntry], err error, lost bool) {
	l.t.add("Patched %v %v", err, lost)
}

func (l *fakeLedger) Confirm(name string, a transfer.ObjectAttrs, deleted bool) {
	l.t.add("Confirm %s %d %v", name, a.Generation, deleted)
}

func (l *fakeLedger) NoteConflict(name string, remote transfer.ObjectAttrs, gone, settled bool) {
	l.t.add("NoteConflict %s %d %v %v", name, remote.Generation, gone, settled)
}

// fakeBucket holds live versions by name, records the calls the flow
// makes, and lets a test change the bucket as a Put arrives. Calls a
// test does not expect reach the nil Bucket and panic.
type fakeBucket struct {
	transfer.Bucket
	t       *trail
	mu      sync.Mutex
	objects map[string]transfer.ObjectAttrs
	gen     int64
	// beforePut, if set, runs as a Put of name arrives; a non-nil error
	// is the Put's answer, and nothing is written.
	beforePut func(name string, o transfer.PutOptions) error
	puts      []transfer.PutOptions // every Put's options, in order
	statErr   error                 // if set, every Stat's answer
}

func (b *fakeBucket) Stat(ctx context.Context, name string) (transfer.ObjectAttrs, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.t.add("Stat %s", name)
	if b.statErr != nil {
		return transfer.ObjectAttrs{}, b.statErr
	}
	a, ok := b.objects[name]
	if !ok {
		return transfer.ObjectAttrs{}, fmt.Errorf("%s: %w", name, transfer.ErrNotExist)
	}
	return a, nil
}

func (b *fakeBucket) Put(ctx context.Context, name string, r io.Reader, o transfer.PutOptions) (transfer.ObjectAttrs, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return transfer.ObjectAttrs{}, err
	}
	b.t.add("Put %s if=%d", name, o.IfGenerationMatch)
	b.mu.Lock()
	b.puts = append(b.puts, o)
	before := b.beforePut
	b.mu.Unlock()
	if before != nil {
		if err := before(name, o); err != nil {
			return transfer.ObjectAttrs{}, err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur := b.objects[name]; cur.Generation != o.IfGenerationMatch {
		return transfer.ObjectAttrs{}, fmt.Errorf("%s: %w", name, transfer.ErrPrecondition)
	}
	b.gen++
	a := transfer.ObjectAttrs{Name: name, Generation: b.gen, Size: int64(len(data)), CRC32C: o.CRC32C, Metadata: o.Metadata, ContentEncoding: o.ContentEncoding}
	b.objects[name] = a
	return a, nil
}

func (b *fakeBucket) Delete(ctx context.Context, name string, gen int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.t.add("Delete %s %d", name, gen)
	cur, ok := b.objects[name]
	switch {
	case !ok:
		return fmt.Errorf("%s: %w", name, transfer.ErrNotExist)
	case gen > 0 && cur.Generation != gen:
		return fmt.Errorf("%s: %w", name, transfer.ErrPrecondition)
	}
	delete(b.objects, name)
	return nil
}

// put makes a version of name in b as another writer (or an earlier
// try, with its upload ID) would.
func (b *fakeBucket) put(name string, size int64, md map[string]string) transfer.ObjectAttrs {
	b.gen++
	a := transfer.ObjectAttrs{Name: name, Generation: b.gen, Size: size, Metadata: md}
	b.objects[name] = a
	return a
}

// setup returns a flow over a fake ledger and bucket, and the job of an
// upload of content (a data file holding data) based on base.
func setup(t *testing.T, data string, base int64) (*Flow[*fakeEntry], *fakeLedger, *fakeBucket, Job[*fakeEntry]) {
	t.Helper()
	tr := &trail{}
	dir := t.TempDir()
	const id = 7
	if err := os.WriteFile(durable.DataPath(dir, id), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	b := &fakeBucket{t: tr, objects: map[string]transfer.ObjectAttrs{}, gen: 100}
	l := &fakeLedger{t: tr, e: &fakeEntry{}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := &Flow[*fakeEntry]{
		Ledger:    l,
		Bucket:    b,
		Sender:    send.New(send.Options{Bucket: b, DataDir: dir, Logger: log}),
		Folders:   folders.New(b, log),
		DataDir:   dir,
		ChunkSize: 4,
		TooBig:    func(name string, size int64) error { return fmt.Errorf("%s: too big (%d)", name, size) },
		Log:       log,
	}
	u := Job[*fakeEntry]{Entry: l.e, Name: "dir/f", Version: 3, Base: base, Size: int64(len(data)), ID: id,
		Meta: map[string]string{"mode": "644"}, Seq: 1}
	return f, l, b, u
}

// TestRefusedOwnTry: the bucket refuses an upload because a version
// written by one of the entry's unconfirmed tries (with other bytes)
// landed on the base meanwhile. That is not a conflict: the upload is
// queued again, based on that version, and no copy is made beside.
func TestRefusedOwnTry(t *testing.T) {
	f, l, b, u := setup(t, "new bytes", 0)
	l.e.attempts = []string{"t1"}
	base := b.put(u.Name, 3, map[string]string{objmeta.AttemptKey: "another writer's"})
	u.Base = base.Generation
	var late transfer.ObjectAttrs
	b.beforePut = func(name string, o transfer.PutOptions) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.gen++
		late = transfer.ObjectAttrs{Name: name, Generation: b.gen, Size: 2, Metadata: map[string]string{objmeta.AttemptKey: "t1"}}
		b.objects[name] = late
		return fmt.Errorf("%s: %w", name, transfer.ErrPrecondition)
	}
	f.Run(context.Background(), u)

	want := []string{
		"Tries", "Stat dir/f", "Tries", // an earlier try? not the live version
		"RecordAttempt",
		fmt.Sprintf("Put dir/f if=%d", base.Generation),
		"Superseded",
		"Stat dir/f", "Tries", // the refusal: whose version is there now?
		fmt.Sprintf("Requeue %d->%d", base.Generation, late.Generation),
	}
	checkTrail(t, l.t, want)
	if n := len(b.puts); n != 1 {
		t.Errorf("%d puts, want 1 (no conflict copy)", n)
	}
	for _, c := range l.t.calls {
		if strings.HasPrefix(c, "Conflict") || strings.HasPrefix(c, "Done") || strings.HasPrefix(c, "NoteConflict") {
			t.Errorf("call %q: the entry's own try is not a conflict", c)
		}
	}
}

// TestRefusedOtherWriter: the bucket refuses an upload because another
// writer replaced the base. The local version is saved beside the name
// under its conflict name, as a new object carrying an upload ID that
// was recorded, with that name, before the copy was sent; then the
// conflict is settled and told.
func TestRefusedOtherWriter(t *testing.T) {
	f, l, b, u := setup(t, "local bytes", 0)
	base := b.put(u.Name, 3, nil)
	u.Base = base.Generation
	l.settled = true
	var theirs transfer.ObjectAttrs
	b.beforePut = func(name string, o transfer.PutOptions) error {
		if name != u.Name {
			return nil
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.gen++
		theirs = transfer.ObjectAttrs{Name: name, Generation: b.gen, Size: 5, Metadata: map[string]string{objmeta.AttemptKey: "theirs"}}
		b.objects[name] = theirs
		return nil // the precondition fails on their version
	}
	start := time.Now()
	f.Run(context.Background(), u)
	end := time.Now()

	if len(b.puts) != 2 {
		t.Fatalf("%d puts, want 2 (the upload, its copy)\n%s", len(b.puts), l.t)
	}
	sibling := ""
	for _, at := range []time.Time{start, end} {
		if name := objmeta.ConflictName(u.Name, at, 1); b.objects[name].Generation != 0 {
			sibling = name
		}
	}
	if sibling == "" {
		t.Fatalf("no conflict copy named by objmeta.ConflictName in the bucket\n%s", l.t)
	}
	copyPut := b.puts[1]
	attempt := copyPut.Metadata[objmeta.AttemptKey]
	if copyPut.IfGenerationMatch != 0 || attempt == "" || copyPut.Metadata["mode"] != "644" {
		t.Errorf("the copy was sent with %+v, want a new object with the upload's metadata and an upload ID", copyPut)
	}
	if got := b.objects[sibling].Size; got != int64(len("local bytes")) {
		t.Errorf("the copy holds %d bytes", got)
	}
	recorded := l.t.index("RecordAttempt " + attempt + " " + sibling)
	sent := l.t.index("Put " + sibling)
	if recorded < 0 || sent < 0 || recorded > sent {
		t.Errorf("the copy's upload ID and name recorded at %d, the copy sent at %d: want recorded first\n%s", recorded, sent, l.t)
	}
	if b.objects[u.Name].Generation != theirs.Generation {
		t.Errorf("the name holds generation %d, want theirs (%d) kept", b.objects[u.Name].Generation, theirs.Generation)
	}
	checkTrail(t, l.t, []string{
		"Tries", // no earlier try to look for
		"RecordAttempt",
		fmt.Sprintf("Put dir/f if=%d", base.Generation),
		"Superseded",
		"Stat dir/f", "Tries", // the refusal: not an upload of ours
		"Tries", // no copy saved by an earlier try
		"RecordAttempt " + attempt + " " + sibling,
		"Put " + sibling + " if=0",
		"Stat " + sibling, fmt.Sprintf("Confirm %s %d false", sibling, b.objects[sibling].Generation),
		"Stat dir/f", fmt.Sprintf("Confirm dir/f %d false", theirs.Generation),
		fmt.Sprintf("NoteConflict dir/f %d false false", theirs.Generation),
		"Conflict " + sibling,
		fmt.Sprintf("NoteConflict dir/f %d false true", theirs.Generation),
		"Uploaded 1",
	})
	if i := l.t.index("Done"); i >= 0 {
		t.Errorf("a saved conflict settled as an upload too\n%s", l.t)
	}
}

// TestDeleteBaseGone: a deletion whose base the bucket no longer has is
// done, not an error; the name is confirmed gone before it is settled.
func TestDeleteBaseGone(t *testing.T) {
	f, l, _, u := setup(t, "", 0)
	u.Deleted, u.Base = true, 42
	f.Run(context.Background(), u)
	checkTrail(t, l.t, []string{
		"Tries",
		"Delete dir/f 42",
		"ForgetCopy dir/f",
		"Confirm dir/f 0 true",
		"Deleted <nil> true",
	})
}

// TestDeleteUnconfirmedOtherWriter: a deletion of a name whose upload
// went unconfirmed finds, in place of its base, a version another
// writer made: it is not ours to delete, and the deletion is settled
// without being confirmed (the name shows that writer's object).
func TestDeleteUnconfirmedOtherWriter(t *testing.T) {
	for _, base := range []int64{0, 42} {
		f, l, b, u := setup(t, "", 0)
		u.Deleted, u.Base = true, base
		l.e.attempts = []string{"t1"}
		other := b.put(u.Name, 3, map[string]string{objmeta.AttemptKey: "someone else's"})
		f.Run(context.Background(), u)
		want := []string{"Tries", "Stat dir/f", "Tries", "Deleted <nil> false"}
		if base > 0 {
			want = append([]string{"Tries", "Delete dir/f 42"}, want[1:]...)
		}
		checkTrail(t, l.t, want)
		if got := b.objects[u.Name]; got.Generation != other.Generation {
			t.Errorf("base %d: the other writer's version is gone (%+v)", base, got)
		}
	}
}

// TestDeleteUnconfirmedStatFails: if whether a version of ours is there
// cannot be told, the deletion fails and is tried again, rather than
// settled as done.
func TestDeleteUnconfirmedStatFails(t *testing.T) {
	f, l, b, u := setup(t, "", 0)
	u.Deleted, u.Base = true, 0
	l.e.attempts = []string{"t1"}
	b.statErr = errors.New("connection reset")
	f.Run(context.Background(), u)
	checkTrail(t, l.t, []string{"Tries", "Stat dir/f", "Deleted connection reset true"}) // gone counts only without an error
}

// TestAdoptEarlierTry: the live version is an unconfirmed try of the
// entry holding exactly what would be sent: it is confirmed and settled
// as the upload's result, and nothing is sent.
func TestAdoptEarlierTry(t *testing.T) {
	f, l, b, u := setup(t, "same bytes", 0)
	body, held := f.scan(context.Background(), u)
	if !body.OK || held {
		t.Fatalf("scan: %+v, held %v", body, held)
	}
	fi, err := os.Stat(durable.DataPath(f.DataDir, u.ID))
	if err != nil {
		t.Fatal(err)
	}
	l.e.attempts = []string{"t1"}
	live := b.put(u.Name, u.Size, objmeta.ForUpload(u.Meta, fi.ModTime(), "t1"))
	live.CRC32C = body.Whole
	b.objects[u.Name] = live
	f.Run(context.Background(), u)
	checkTrail(t, l.t, []string{
		"Tries", "Stat dir/f", "Tries",
		"Superseded",
		fmt.Sprintf("Confirm dir/f %d false", live.Generation),
		fmt.Sprintf("Done %d <nil>", live.Generation),
	})
	if len(b.puts) != 0 {
		t.Errorf("%d puts, want none", len(b.puts))
	}
}

// TestBackoff: a second, doubled at each failure, at most a minute.
func TestBackoff(t *testing.T) {
	for retries, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 6: 32 * time.Second, 7: time.Minute, 30: time.Minute} {
		if got := Backoff(retries); got != want {
			t.Errorf("Backoff(%d) = %v, want %v", retries, got, want)
		}
	}
}

// checkTrail checks that the trail is exactly the calls of want, in
// that order, each call starting with its line of want.
func checkTrail(t *testing.T, tr *trail, want []string) {
	t.Helper()
	tr.mu.Lock()
	calls := slices.Clone(tr.calls)
	tr.mu.Unlock()
	ok := len(calls) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = strings.HasPrefix(calls[i], want[i])
	}
	if !ok {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
}

// TestRefusedStatFails: the bucket refuses an upload (its version is not
// the base), and then does not say what it holds. Nothing is decided on
// that: no copy is saved beside (the version there may be an
// unconfirmed try of this entry's), and the upload ends with an error,
// to be tried again.
func TestRefusedStatFails(t *testing.T) {
	f, l, b, u := setup(t, "local bytes", 0)
	base := b.put(u.Name, 3, nil)
	u.Base = base.Generation
	b.beforePut = func(name string, o transfer.PutOptions) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.gen++
		b.objects[name] = transfer.ObjectAttrs{Name: name, Generation: b.gen, Size: 2}
		b.statErr = errors.New("connection reset")
		return fmt.Errorf("%s: %w", name, transfer.ErrPrecondition)
	}
	f.Run(context.Background(), u)
	if n := len(b.puts); n != 1 {
		t.Errorf("%d puts, want 1 (no conflict copy)", n)
	}
	var done string
	for _, c := range l.t.calls {
		if strings.HasPrefix(c, "Conflict") || strings.HasPrefix(c, "NoteConflict") || strings.HasPrefix(c, "Requeue") {
			t.Errorf("call %q: decided with the bucket's version unknown", c)
		}
		if strings.HasPrefix(c, "Done") {
			done = c
		}
	}
	if !strings.Contains(done, "connection reset") {
		t.Errorf("the upload ended with %q; want Done with the Stat's error\n%s", done, l.t)
	}
}
