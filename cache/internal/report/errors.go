package report

import (
	"context"
	"errors"
	"time"
)

// ErrorEvent is one failure that the log reported.
type ErrorEvent struct {
	Time   time.Time
	Op     string // "upload", "delete", "download", "conflict", "copy", "check"
	Object string
	Err    string
}

// MaxRecentErrors is how many ErrorEvents a RecentErrors keeps, and so
// how many a Status lists.
const MaxRecentErrors = 20

// RecentErrors keeps the last MaxRecentErrors failures noted, oldest
// first; a new one pushes out the oldest. The zero value is empty and
// ready. It is not safe for concurrent use: its owner guards it (in
// package cache, Cache.mu).
type RecentErrors struct {
	ring  [MaxRecentErrors]ErrorEvent
	first int // index of the oldest event in ring
	n     int // events held
}

// Note keeps err, a failure of op on object, as the newest event, timed
// now. It keeps what it is given: a caller leaves out what is not a
// failure to report (IsCancel).
func (r *RecentErrors) Note(op, object string, err error) {
	ev := ErrorEvent{Time: time.Now(), Op: op, Object: object, Err: err.Error()}
	if r.n < MaxRecentErrors {
		r.ring[(r.first+r.n)%MaxRecentErrors] = ev
		r.n++
		return
	}
	r.ring[r.first] = ev
	r.first = (r.first + 1) % MaxRecentErrors
}

// Events returns a copy of the events kept, oldest first; nil if none.
func (r *RecentErrors) Events() []ErrorEvent {
	if r.n == 0 {
		return nil
	}
	out := make([]ErrorEvent, r.n)
	for i := range out {
		out[i] = r.ring[(r.first+i)%MaxRecentErrors]
	}
	return out
}

// IsCancel reports whether err is only the end of a context: what its
// caller asked for (a handle closed, a shutdown), not a failure to tell
// the operator of.
func IsCancel(err error) bool {
	return errors.Is(err, context.Canceled)
}
