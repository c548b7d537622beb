package cache

import (
	"log/slog"
	"time"
)

// repeatLimit keeps a failure that repeats on every tick (such as applying
// the journal to a broken index, tried every second) from filling the
// log: the first failure is logged, then at most one line per every with
// the count of failures since the last line, and one line when it
// succeeds again. It is used by one goroutine only.
type repeatLimit struct {
	every time.Duration
	now   func() time.Time

	failing bool
	began   time.Time // first failure since the last success
	logged  time.Time // when the last failure line was written
	since   int       // failures since that line, not logged
	total   int       // failures since the last success
}

func newRepeatLimit(every time.Duration) *repeatLimit {
	return &repeatLimit{every: every, now: time.Now}
}

// failed records a failure and logs it if it is the first, or if every
// has passed since the last line.
func (r *repeatLimit) failed(log *slog.Logger, msg string, err error) {
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

// succeeded records a success and logs the recovery of a failing one.
func (r *repeatLimit) succeeded(log *slog.Logger, msg string) {
	if !r.failing {
		return
	}
	log.Info(msg, "failures", r.total, "failed_for", r.now().Sub(r.began).Round(time.Second))
	*r = repeatLimit{every: r.every, now: r.now}
}
