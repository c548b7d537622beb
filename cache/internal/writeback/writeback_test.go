package writeback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// fake is a Ledger that records its calls. Its queue is a list of names
// handed out by the next TakeDue; Upload blocks on release, if set.
type fake struct {
	mu      sync.Mutex
	calls   []string
	queue   []string
	running int // uploads in Upload now
	most    int // the most at once
	release chan struct{}
	started chan string // Upload sends its name here, if set

	left    []Progress // what Left answers, in turn (the last one stays)
	stuck   []int
	names   []string
	flushed []bool // what Flushed answers, in turn
	wake    chan struct{}
	checked chan struct{} // Checkpoint sends here, if set
}

func (f *fake) note(format string, args ...any) {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *fake) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fake) TakeDue() ([]string, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	due := f.queue
	f.queue = nil
	if len(due) > 0 {
		f.calls = append(f.calls, fmt.Sprintf("TakeDue %v", due))
	}
	return due, time.Time{}
}

func (f *fake) Upload(ctx context.Context, name string) {
	f.mu.Lock()
	f.running++
	f.most = max(f.most, f.running)
	f.calls = append(f.calls, "Upload "+name)
	release, started := f.release, f.started
	f.mu.Unlock()
	if started != nil {
		started <- name
	}
	if release != nil {
		<-release // even after ctx ends: the test says when
	}
	f.mu.Lock()
	f.running--
	f.mu.Unlock()
}

func (f *fake) Abandon(name string) { f.note("Abandon %s", name) }
func (f *fake) Done(name string)    { f.note("Done %s", name) }
func (f *fake) SendAll()            { f.note("SendAll") }

func (f *fake) Left(since time.Time) (Progress, []string, int, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "Left")
	left, stuck := f.left[0], f.stuck[0]
	if len(f.left) > 1 {
		f.left, f.stuck = f.left[1:], f.stuck[1:]
	}
	return left, slices.Clone(f.names), stuck, f.wake
}

func (f *fake) Force(name string) (Flushing[int], bool, error) {
	f.note("Force %s", name)
	if name == "damaged" {
		return Flushing[int]{}, false, errors.New("damaged")
	}
	return Flushing[int]{Entry: 7, Name: name, Target: 3}, name != "clean", nil
}

func (f *fake) Flushed(fl Flushing[int]) (bool, <-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("Flushed %s %d %d", fl.Name, fl.Entry, fl.Target))
	done := f.flushed[0]
	if len(f.flushed) > 1 {
		f.flushed = f.flushed[1:]
	}
	return done, f.wake, nil
}

func (f *fake) Checkpoint() error {
	if f.checked != nil {
		select {
		case f.checked <- struct{}{}:
		default:
		}
	}
	return nil
}

func (f *fake) CountHidden() {}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// waitFor polls cond for up to 5 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// The uploader takes the names due at a kick, runs each one's upload at
// most parallelism at once, and ends each with Done after its Upload;
// the ones StopUploads finds without a slot are abandoned, then done.
func TestUploaderRunsDueNamesUnderTheLimit(t *testing.T) {
	f := &fake{release: make(chan struct{})}
	l := New[int](f, 2, nil, quiet)
	l.Start()
	defer l.StopCheckpointer()
	f.mu.Lock()
	f.queue = []string{"a", "b", "c"}
	f.mu.Unlock()
	l.Kick()
	l.Kick() // a second kick does not block
	waitFor(t, "two uploads", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.running == 2 })
	time.Sleep(20 * time.Millisecond)
	f.release <- struct{}{} // one ends: the third starts
	waitFor(t, "an upload done", func() bool {
		return slices.ContainsFunc(f.log(), func(c string) bool { return c[:4] == "Done" })
	})
	waitFor(t, "the third upload", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.running == 2 })

	f.mu.Lock()
	f.queue = []string{"d"}
	f.mu.Unlock()
	l.Kick() // d waits for a slot; StopUploads abandons it
	waitFor(t, "d taken", func() bool { return slices.Contains(f.log(), "TakeDue [d]") })
	stopped := make(chan struct{})
	go func() {
		l.StopUploads()
		close(stopped)
	}()
	waitFor(t, "d abandoned", func() bool { return slices.Contains(f.log(), "Abandon d") })
	select {
	case <-stopped:
		t.Fatal("StopUploads returned while uploads ran")
	case <-time.After(20 * time.Millisecond):
	}
	close(f.release)
	<-stopped
	calls := f.log()
	if f.most != 2 {
		t.Errorf("%d uploads at once, want 2", f.most)
	}
	for _, name := range []string{"a", "b", "c"} {
		up, done := slices.Index(calls, "Upload "+name), slices.Index(calls, "Done "+name)
		if up < 0 || done < up || slices.Contains(calls, "Abandon "+name) {
			t.Errorf("%s: calls %q", name, calls)
		}
	}
	ab, done := slices.Index(calls, "Abandon d"), slices.Index(calls, "Done d")
	if slices.Contains(calls, "Upload d") || ab < 0 || done < ab {
		t.Errorf("d: calls %q", calls)
	}
}

// While offline, the uploader takes nothing; once online, it does.
func TestUploaderWaitsOnline(t *testing.T) {
	f := &fake{queue: []string{"a"}, flushed: []bool{false}}
	online := make(chan struct{}) // closed while online
	l := New[int](f, 1, func() <-chan struct{} { return online }, quiet)
	l.Start()
	defer l.StopCheckpointer()
	defer l.StopUploads()
	time.Sleep(30 * time.Millisecond)
	if calls := f.log(); len(calls) != 0 {
		t.Fatalf("offline, the uploader called %q", calls)
	}
	// FlushName does not wait for the outage.
	if err := l.FlushName(context.Background(), "x"); !errors.Is(err, transfer.ErrOffline) {
		t.Errorf("FlushName offline: %v, want ErrOffline", err)
	}
	close(online)
	waitFor(t, "the upload", func() bool { return slices.Contains(f.log(), "Done a") })
}

// Flush sends all, reports each change of what is left once, and
// returns the names left, sorted, once all of them are stuck.
func TestFlushGivesUpWhenAllStuck(t *testing.T) {
	wake := make(chan struct{})
	close(wake)
	f := &fake{
		left:  []Progress{{2, 20}, {2, 20}, {1, 5}},
		stuck: []int{0, 0, 1},
		names: []string{"z", "a"},
		wake:  wake,
	}
	l := New[int](f, 1, nil, quiet)
	var seen []Progress
	got := l.Flush(context.Background(), func(p Progress) { seen = append(seen, p) })
	if !slices.Equal(got, []string{"a", "z"}) {
		t.Errorf("Flush = %q", got)
	}
	if !slices.Equal(seen, []Progress{{2, 20}, {1, 5}}) {
		t.Errorf("progress %v", seen)
	}
	if calls := f.log(); !slices.Equal(calls, []string{"SendAll", "Left", "Left", "Left"}) {
		t.Errorf("calls %q", calls)
	}

	f = &fake{left: []Progress{{0, 0}}, stuck: []int{0}}
	if got := New[int](f, 1, nil, quiet).Flush(context.Background(), nil); got != nil {
		t.Errorf("nothing left: Flush = %q", got)
	}
	f = &fake{left: []Progress{{1, 1}}, stuck: []int{0}, names: []string{"n"}, wake: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := New[int](f, 1, nil, quiet).Flush(ctx, nil); !slices.Equal(got, []string{"n"}) {
		t.Errorf("ctx ended: Flush = %q", got)
	}
}

// FlushName hands Flushed back what Force made, until it says done; a
// name with nothing to send or an error of Force ends at once; ctx ends
// the wait.
func TestFlushName(t *testing.T) {
	wake := make(chan struct{})
	close(wake)
	f := &fake{flushed: []bool{false, false, true}, wake: wake}
	l := New[int](f, 1, nil, quiet)
	if err := l.FlushName(context.Background(), "n"); err != nil {
		t.Fatal(err)
	}
	want := []string{"Force n", "Flushed n 7 3", "Flushed n 7 3", "Flushed n 7 3"}
	if calls := f.log(); !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
	if err := l.FlushName(context.Background(), "clean"); err != nil {
		t.Errorf("nothing to send: %v", err)
	}
	if err := l.FlushName(context.Background(), "damaged"); err == nil {
		t.Error("Force's error not returned")
	}
	f = &fake{flushed: []bool{false}, wake: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := New[int](f, 1, nil, quiet).FlushName(ctx, "n"); !errors.Is(err, context.Canceled) {
		t.Errorf("ctx ended: %v", err)
	}
}

// The checkpointer applies the journal until it is stopped.
func TestCheckpointer(t *testing.T) {
	f := &fake{checked: make(chan struct{}, 1)}
	l := New[int](f, 1, nil, quiet)
	l.Start()
	select {
	case <-f.checked:
	case <-time.After(5 * time.Second):
		t.Fatal("no checkpoint")
	}
	l.StopUploads()
	l.StopCheckpointer()
}
