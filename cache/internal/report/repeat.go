package report

import (
	"log/slog"
	"time"
)

// RepeatLimit keeps a failure that repeats on every tick (such as applying
// the journal to a broken index, tried every second) from filling the
// log: the first failure is logged, then at most one line per every with
// the count of failures since the last line, and one line when it
// succeeds again. It is used by one goroutine only.
type RepeatLimit struct {
	every time.Duration
	now   func() time.Time

	failing bool
	began   time.Time // first failure since the last success
	logged  time.Time // when the last failure line was written
	since   int       // failures since that line, not logged
	total   int       // failures since the last success
}

// NewRepeatLimit returns a RepeatLimit that logs a failure that goes on
// at most once per every.
func NewRepeatLimit(every time.Duration) *RepeatLimit {
	return &RepeatLimit{every: every, now: time.Now}
}

// Failed records a failure and logs it (a warning, msg with err) if it is
// the first, or if every has passed since the last line.
func (r *RepeatLimit) Failed(log *slog.Logger, msg string, err error) {
	now := r.now()
	r.total++
	if !r.failing {
		r.failing, r.began, r.logged = true, now, now
		log.Warn(msg, "err", err)
		return
	}
	r.since++
	if now.Sub(r.logged) < r.every {
		return
	}
	log.Warn(msg, "err", err, "failures_since_last_warning", r.since,
		"failing_for", now.Sub(r.began).Round(time.Second))
	r.logged, r.since = now, 0
}

// Succeeded records a success and logs the recovery (msg, with the count
// of failures and how long they went on) of a failing one.
func (r *RepeatLimit) Succeeded(log *slog.Logger, msg string) {
	if !r.failing {
		return
	}
	log.Info(msg, "failures", r.total, "failed_for", r.now().Sub(r.began).Round(time.Second))
	*r = RepeatLimit{every: r.every, now: r.now}
}
