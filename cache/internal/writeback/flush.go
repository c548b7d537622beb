package writeback

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// Progress reports what Flush still has to upload.
type Progress struct {
	Files int
	Bytes int64
}

// Flush has every change sent now, ignoring the write-back delay, and
// waits until none is left or ctx ends. progress, if not nil, is called
// whenever the amount left changes. It returns the names left (sorted;
// nil when everything is in the bucket); it returns early, with them,
// once every one left is stuck (Ledger.Left): no wait would send them.
func (l *Loops[E]) Flush(ctx context.Context, progress func(Progress)) []string {
	start := time.Now()
	l.ledger.SendAll()
	last := Progress{Files: -1}
	for {
		left, names, stuck, wake := l.ledger.Left(start)
		if progress != nil && left != last {
			progress(left)
			last = left
		}
		if left.Files == 0 {
			return nil
		}
		if stuck == left.Files {
			sort.Strings(names)
			return names
		}
		select {
		case <-wake:
		case <-ctx.Done():
			sort.Strings(names)
			return names
		}
		// Counting walks every entry: at most 20 times a second, not once
		// per upload, or a flush of many files costs their square.
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// FlushName has name's changes sent now, even while it is open for
// writing, and waits until an upload that started after the call has
// succeeded (nil: everything written before the call is in the bucket),
// the ledger says it failed (Force, Flushed), the bucket is offline, or
// ctx ends.
func (l *Loops[E]) FlushName(ctx context.Context, name string) error {
	f, wait, err := l.ledger.Force(name)
	if !wait {
		return err
	}
	for {
		done, wake, err := l.ledger.Flushed(f)
		if err != nil || done {
			return err
		}
		if err := l.offlineErr(name); err != nil {
			return err // offline.go: fsync does not hang for the outage
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return fmt.Errorf("%s is not in the bucket yet: %w", name, ctx.Err())
		case <-l.offlineTick():
		}
	}
}
