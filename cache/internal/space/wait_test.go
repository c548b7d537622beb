package space

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// tries is a fake caller of WaitForRoom: the i-th try runs step[i], and
// every call of the wait made in a try is in the trail.
type tries struct {
	steps []func(w *Wait) (bool, error)
	trail []string
}

func (f *tries) try(w *Wait) (bool, error) {
	i := len(f.trail)
	f.trail = append(f.trail, fmt.Sprintf("try last=%v", w.Last()))
	if i >= len(f.steps) {
		return false, errors.New("one try too many")
	}
	return f.steps[i](w)
}

// short is a try that finds no room for grow bytes and, as a cache does,
// fails if it is the last, else waits if the wait says so (also, if not
// nil, runs before its Watch).
func (f *tries) short(grow int64, also func()) func(w *Wait) (bool, error) {
	return func(w *Wait) (bool, error) {
		if w.Last() {
			return false, errors.New("full")
		}
		waits := w.Waits(grow)
		f.trail[len(f.trail)-1] += fmt.Sprintf(" waits=%v", waits)
		if waits {
			if also != nil {
				also()
			}
			w.Watch(grow, "f")
		}
		return false, nil
	}
}

func done(*Wait) (bool, error) { return true, nil }

// wait runs WaitForRoom for f with fullWait, and fails the test if it
// has not ended within a second.
func wait(t *testing.T, b *Budget, f *tries, fullWait time.Duration) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- b.WaitForRoom(fullWait, slog.New(slog.DiscardHandler), f.try) }()
	select {
	case err := <-errc:
		return err
	case <-time.After(time.Second):
		t.Fatalf("still waiting after a second; tries: %q", f.trail)
		return nil
	}
}

// A wake after a try that found no room brings the next try.
func TestWaitForRoomWakes(t *testing.T) {
	b := measured(100, 0, 0)
	b.Charge(0, 100)
	f := &tries{}
	f.steps = []func(*Wait) (bool, error){f.short(10, nil), done}
	go func() {
		for b.Waiters() == 0 {
			time.Sleep(time.Millisecond)
		}
		b.Wake()
	}()
	if err := wait(t, b, f, time.Hour); err != nil || len(f.trail) != 2 {
		t.Errorf("WaitForRoom = %v after %q; want nil after two tries", err, f.trail)
	}
	if b.Waiters() != 0 {
		t.Errorf("%d waiters after the wait, want none", b.Waiters())
	}
}

// Room freed between a try and its Watch is taken at once: no wait.
func TestWaitForRoomFitsAtWatch(t *testing.T) {
	b := measured(100, 0, 0)
	b.Charge(0, 100)
	f := &tries{}
	f.steps = []func(*Wait) (bool, error){f.short(10, func() { b.Charge(100, 0) }), done}
	if err := wait(t, b, f, time.Hour); err != nil || len(f.trail) != 2 || b.Waiters() != 0 {
		t.Errorf("WaitForRoom = %v after %q with %d waiters; want nil after two tries, none", err, f.trail, b.Waiters())
	}
}

// At the deadline, one last try, whose error ends the wait.
func TestWaitForRoomLastTry(t *testing.T) {
	b := measured(100, 0, 0)
	b.Charge(0, 100)
	f := &tries{}
	f.steps = []func(*Wait) (bool, error){f.short(10, nil), f.short(10, nil)}
	err := wait(t, b, f, 10*time.Millisecond)
	want := "try last=false waits=true; try last=true"
	if err == nil || strings.Join(f.trail, "; ") != want {
		t.Errorf("WaitForRoom = %v after %q; want an error after %q", err, f.trail, want)
	}
	if b.Waiters() != 0 {
		t.Errorf("%d waiters after the wait, want none", b.Waiters())
	}
}

// The first try that finds the disk short of its floor does not wait: the
// write measures the disk and tries again at once; after that it waits.
func TestWaitForRoomMeasuresFirst(t *testing.T) {
	b := measured(1<<20, 100, 50) // measures fail (no directory): the last one stays
	f := &tries{}
	f.steps = []func(*Wait) (bool, error){f.short(10, nil), f.short(10, nil), done}
	go func() {
		for b.Waiters() == 0 {
			time.Sleep(time.Millisecond)
		}
		b.Wake()
	}()
	err := wait(t, b, f, time.Hour)
	want := "try last=false waits=false; try last=false waits=true; try last=false"
	if err != nil || strings.Join(f.trail, "; ") != want {
		t.Errorf("WaitForRoom = %v after %q; want nil after %q", err, f.trail, want)
	}
}
