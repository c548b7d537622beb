package pending

import (
	"iter"
	"sort"
	"time"
)

// Idle is how long the uploader sleeps when nothing queued is due: after
// a scan that found nothing to wait for, it wakes by itself that much
// later (Wakes), unless a Schedule or a kick wakes it sooner.
const Idle = time.Hour

// Queue is the uploader's queue: the names whose changes are to be sent
// and when each is due, the names with a transfer running, and when the
// uploader wakes by itself. The zero Queue is empty and ready to use.
// It has no lock: its owner guards it (see the package comment).
type Queue struct {
	due      map[string]time.Time // queued names -> when their upload is due
	inFlight map[string]bool      // names with a transfer running (whatever entry)
	wakes    time.Time            // when the uploader wakes by itself; zero: not known yet
}

// Verdict is what the owner decides of a queued name during TakeDue.
type Verdict int

const (
	// Ready: the name may be sent; it is taken if it is due and no
	// transfer of it runs, and otherwise counts for when the next one is
	// due.
	Ready Verdict = iota
	// Wait: the name stays queued and is not sent now, however due; it
	// does not count for when the next one is due (the end of what it
	// waits for queues it again, or wakes the uploader).
	Wait
	// Drop: the name leaves the queue (nothing to send, or whatever
	// makes it sendable again queues it again).
	Drop
)

// Schedule queues name, due at at; a name already queued keeps the
// sooner of its time and at. It reports whether the uploader must be
// woken: only if at is before the uploader would wake by itself (a
// rescan of the queue per queued name would cost its square), in which
// case at becomes that time.
func (q *Queue) Schedule(name string, at time.Time) (wake bool) {
	if q.due == nil {
		q.due = map[string]time.Time{}
	}
	if cur, ok := q.due[name]; !ok || at.Before(cur) {
		q.due[name] = at
	}
	if q.wakes.IsZero() || at.Before(q.wakes) {
		q.wakes = at
		return true
	}
	return false
}

// SendNow queues name due at once, before any time Schedule gives,
// whatever it was due at. It does not move when the uploader wakes: the
// caller wakes it.
func (q *Queue) SendNow(name string) {
	if q.due == nil {
		q.due = map[string]time.Time{}
	}
	q.due[name] = time.Time{}
}

// Remove takes name off the queue (a transfer of it running goes on).
func (q *Queue) Remove(name string) { delete(q.due, name) }

// Queued reports whether name is queued.
func (q *Queue) Queued(name string) bool {
	_, ok := q.due[name]
	return ok
}

// DueAt is when name's upload is due, if it is queued.
func (q *Queue) DueAt(name string) (time.Time, bool) {
	at, ok := q.due[name]
	return at, ok
}

// Len is the number of names queued.
func (q *Queue) Len() int { return len(q.due) }

// Wakes is when the uploader wakes by itself (zero before the first
// Schedule or TakeDue).
func (q *Queue) Wakes() time.Time { return q.wakes }

// InFlight reports whether a transfer of name runs: TakeDue took it and
// Done was not called since.
func (q *Queue) InFlight(name string) bool { return q.inFlight[name] }

// Running is the number of names with a transfer running.
func (q *Queue) Running() int { return len(q.inFlight) }

// RunningNames yields the names with a transfer running, in no order.
// The caller changes nothing of q while it ranges over them.
func (q *Queue) RunningNames() iter.Seq[string] {
	return func(yield func(string) bool) {
		for name := range q.inFlight {
			if !yield(name) {
				return
			}
		}
	}
}

// Done records the end of name's transfer (TakeDue took it).
func (q *Queue) Done(name string) { delete(q.inFlight, name) }

// TakeDue scans the queue at now. Of each queued name, decide says what
// its owner makes of it (decide only reads; it changes nothing of q).
// A name dropped leaves the queue. A name Ready, due (at or before now)
// and with no transfer running is taken: off the queue, in flight until
// Done, and among due (sorted). A name Ready and in flight stays queued
// and waits for its transfer to end, so that the bucket sees a name's
// changes in order; it counts for nothing, like a name decide says to
// Wait. next is when the first name Ready and not yet due is, zero if
// none is; the uploader wakes by itself then, or Idle after now.
func (q *Queue) TakeDue(now time.Time, decide func(name string) Verdict) (due []string, next time.Time) {
	for name, at := range q.due {
		v := decide(name)
		switch {
		case v == Drop:
			delete(q.due, name)
		case v == Wait:
		case q.inFlight[name]:
		case !at.After(now):
			delete(q.due, name)
			if q.inFlight == nil {
				q.inFlight = map[string]bool{}
			}
			q.inFlight[name] = true
			due = append(due, name)
		case next.IsZero() || at.Before(next):
			next = at
		}
	}
	sort.Strings(due)
	q.wakes = next
	if next.IsZero() {
		q.wakes = now.Add(Idle)
	}
	return due, next
}
