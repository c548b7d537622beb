package space

// A write's wait for room: the loop of its tries, each one made by the
// caller under its own lock (Try), with the disk measured before each,
// the budget's wake waited on between two, and a deadline, after which
// one last try ends the wait, with the error it gives.
//
// Space freed on the disk by other programs is seen only by measuring:
// a writer held by the free-space floor measures again every FreeTTL
// while it waits. A woken writer measures the disk and tries again at
// once, and waits again if the room is still short.

import (
	"log/slog"
	"time"
)

// Try is one try of a write for the room its growth needs: one critical
// section of the caller's lock (in package cache, Cache.mu), called by
// WaitForRoom with no lock held. It finds how many bytes the growth still
// needs now (the write's file may have moved or gone since the last try)
// and then:
//   - with none needed, or once it made their room (evicting what it
//     must, and removing the evicted files after its lock) and reserved
//     it for the write, it returns done;
//   - if it cannot make the room, and w.Last(), it returns the error
//     that ends the write (saying why: WhyFull);
//   - otherwise, still under its lock, if w.Waits(grow), it sends the
//     changed files now (that may make copies evictable, and wakes the
//     budget) and then calls w.Watch(grow, name), in that order, so that
//     no wake after its try is lost; and it returns not done, no error.
type Try func(w *Wait) (done bool, err error)

// A Wait is one write's wait for room, as its tries see it.
type Wait struct {
	b      *Budget
	maxAge time.Duration // how old a measure of the disk the next try trusts
	last   bool          // the deadline passed
	name   string        // the write's file, as Watch was told
	wake   <-chan struct{}
	fits   bool // at Watch: a measure since the try found the room
	short  bool // at Watch: the disk is short of its floor
}

// Last reports whether this try is the last: the deadline passed, and a
// try that finds no room fails.
func (w *Wait) Last() bool { return w.last }

// Waits reports whether a try that found no room for grow more bytes
// waits (sending the changed files, then Watch): not on the first try
// that finds the disk short of its floor as last measured, which may be
// older than room freed since: the write then measures the disk and
// tries again at once.
func (w *Wait) Waits(grow int64) bool {
	short, _ := w.b.DiskShort(grow)
	again := w.maxAge > 0 && short > 0
	w.maxAge = 0 // after the first try, the disk is measured at every one
	return !again
}

// Watch takes the wake the write of file name waits on for grow more
// bytes (Budget.Watch), under the caller's lock.
func (w *Wait) Watch(grow int64, name string) {
	w.wake, w.fits, w.short = w.b.Watch(grow)
	w.name = name
}

// WaitForRoom runs try until it is done or fails. Before each try it
// measures the disk (trusting a measure up to FreeTTL old the first
// time, none after); between two, it waits for the budget's wake, and
// with the disk short of its floor for at most FreeTTL (room freed by
// other programs is seen only by measuring). fullWait after it first
// waits (logged on log), it tries once more, and that try's error ends
// the wait: a wake lost or never sent costs the write that wait, not
// its room.
func (b *Budget) WaitForRoom(fullWait time.Duration, log *slog.Logger, try Try) error {
	w := &Wait{b: b, maxAge: FreeTTL}
	var deadline <-chan time.Time
	for {
		b.Measure(w.maxAge)
		w.wake = nil
		if done, err := try(w); done || err != nil {
			return err
		}
		if w.wake == nil || w.fits {
			continue // measure the disk again, or take the room a measure found
		}
		var poll <-chan time.Time
		if w.short {
			poll = time.After(FreeTTL)
		}
		if deadline == nil {
			t := time.NewTimer(fullWait)
			defer t.Stop()
			deadline = t.C
			log.Warn("the cache is full of changes not yet uploaded (or its disk is under its free-space floor); writes wait for uploads",
				"object", w.name, "cache_max_size", b.max, "min_free", b.floor)
		}
		select {
		case <-w.wake:
		case <-poll:
		case <-deadline:
			w.last = true // one last try, then the error
		}
		b.Unwatch()
	}
}
