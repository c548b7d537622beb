package pending

import (
	"slices"
	"testing"
	"time"
)

// The sooner time wins, and the uploader is woken only for a time before
// the one it wakes at anyway.
func TestScheduleSoonerWins(t *testing.T) {
	var q Queue
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	if !q.Schedule("a", t0.Add(time.Minute)) {
		t.Fatal("the first Schedule does not wake the uploader")
	}
	if got := q.Wakes(); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("Wakes = %v after the first Schedule", got)
	}
	if q.Schedule("b", t0.Add(2*time.Minute)) {
		t.Error("a Schedule after the uploader's wake woke it")
	}
	if q.Schedule("a", t0.Add(3*time.Minute)) {
		t.Error("a later Schedule of a queued name woke the uploader")
	}
	if at, _ := q.DueAt("a"); !at.Equal(t0.Add(time.Minute)) {
		t.Errorf("a is due at %v, not at the sooner of its times", at)
	}
	if !q.Schedule("b", t0.Add(30*time.Second)) {
		t.Error("a Schedule before the uploader's wake did not wake it")
	}
	if at, _ := q.DueAt("b"); !at.Equal(t0.Add(30*time.Second)) || !q.Wakes().Equal(at) {
		t.Errorf("b is due at %v, the uploader wakes at %v: both should be the sooner time", at, q.Wakes())
	}
	if q.Len() != 2 || !q.Queued("a") || q.Queued("c") {
		t.Errorf("queued: %d names, a %v, c %v", q.Len(), q.Queued("a"), q.Queued("c"))
	}
}

// SendNow queues without moving the uploader's wake, and makes a name
// due before anything.
func TestSendNow(t *testing.T) {
	var q Queue
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	q.Schedule("e", t0)
	wakes := q.Wakes()
	q.SendNow("s")
	if !q.Wakes().Equal(wakes) {
		t.Errorf("SendNow moved the uploader's wake from %v to %v", wakes, q.Wakes())
	}
	q.Schedule("a", t0.Add(time.Hour))
	q.SendNow("a")
	if at, _ := q.DueAt("a"); !at.IsZero() {
		t.Errorf("after SendNow, a is due at %v", at)
	}
	if at, _ := q.DueAt("e"); !at.Equal(t0) {
		t.Errorf("e is due at %v; want %v", at, t0)
	}
	q.Remove("e")
	if q.Queued("e") || q.Len() != 2 {
		t.Errorf("after Remove, e queued %v, %d names", q.Queued("e"), q.Len())
	}
}

// TakeDue takes the names Ready and due, sorted; drops the names the
// owner drops; leaves the names waiting and the names in flight queued,
// counting them for nothing; next is the first Ready name not yet due.
func TestTakeDue(t *testing.T) {
	var q Queue
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	verdicts := map[string]Verdict{}
	queue := func(name string, at time.Time, v Verdict) {
		q.Schedule(name, at)
		verdicts[name] = v
	}
	queue("z-due", now.Add(-time.Second), Ready)
	queue("a-due", now, Ready) // due at now is due
	queue("later", now.Add(time.Minute), Ready)
	queue("soon", now.Add(10*time.Second), Ready)
	queue("drop", now.Add(-time.Minute), Drop)
	queue("drop-later", now.Add(time.Minute), Drop)
	queue("wait", now.Add(-time.Minute), Wait)
	queue("wait-sooner", now.Add(time.Second), Wait) // counts for nothing
	decide := func(name string) Verdict { return verdicts[name] }

	due, next := q.TakeDue(now, decide)
	if !slices.Equal(due, []string{"a-due", "z-due"}) {
		t.Fatalf("due = %q", due)
	}
	if !next.Equal(now.Add(10*time.Second)) || !q.Wakes().Equal(next) {
		t.Fatalf("next = %v, the uploader wakes at %v; want both %v", next, q.Wakes(), now.Add(10*time.Second))
	}
	for _, name := range []string{"a-due", "z-due", "drop", "drop-later"} {
		if q.Queued(name) {
			t.Errorf("%s is still queued", name)
		}
	}
	for _, name := range []string{"later", "soon", "wait", "wait-sooner"} {
		if !q.Queued(name) {
			t.Errorf("%s left the queue", name)
		}
	}
	if !q.InFlight("a-due") || !q.InFlight("z-due") || q.InFlight("soon") || q.Running() != 2 {
		t.Errorf("in flight: a-due %v, z-due %v, soon %v, %d running", q.InFlight("a-due"), q.InFlight("z-due"), q.InFlight("soon"), q.Running())
	}
	running := slices.Sorted(q.RunningNames())
	if !slices.Equal(running, []string{"a-due", "z-due"}) {
		t.Errorf("RunningNames = %q", running)
	}

	// Queued again while its transfer runs: it waits for the transfer,
	// due or not, and counts for nothing.
	q.Schedule("a-due", now.Add(-time.Second))
	q.Schedule("z-due", now.Add(5*time.Second))
	due, next = q.TakeDue(now, decide)
	if len(due) != 0 || !next.Equal(now.Add(10*time.Second)) {
		t.Fatalf("with a-due and z-due in flight: due = %q, next = %v", due, next)
	}
	q.Done("a-due")
	due, _ = q.TakeDue(now, decide)
	if !slices.Equal(due, []string{"a-due"}) || !q.InFlight("a-due") || !q.InFlight("z-due") {
		t.Fatalf("after Done: due = %q, in flight a-due %v, z-due %v", due, q.InFlight("a-due"), q.InFlight("z-due"))
	}
}

// With nothing Ready left to wait for, the uploader wakes Idle later by
// itself, and a Schedule before that wakes it.
func TestTakeDueIdle(t *testing.T) {
	var q Queue
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	due, next := q.TakeDue(now, func(string) Verdict { return Ready })
	if len(due) != 0 || !next.IsZero() || !q.Wakes().Equal(now.Add(Idle)) {
		t.Fatalf("an empty queue: due %q, next %v, wakes %v", due, next, q.Wakes())
	}
	q.Schedule("w", now.Add(-time.Second))
	due, next = q.TakeDue(now, func(string) Verdict { return Wait })
	if len(due) != 0 || !next.IsZero() || !q.Wakes().Equal(now.Add(Idle)) || !q.Queued("w") {
		t.Fatalf("only a name waiting: due %q, next %v, wakes %v, queued %v", due, next, q.Wakes(), q.Queued("w"))
	}
	if q.Schedule("x", now.Add(Idle+time.Second)) {
		t.Error("a Schedule after the idle wake woke the uploader")
	}
	if !q.Schedule("y", now.Add(Idle-time.Second)) {
		t.Error("a Schedule before the idle wake did not wake the uploader")
	}
}
