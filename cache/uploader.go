package cache

// The uploader's scheduling: what each queued name waits for, and the
// entries' side of the loop that starts due uploads (upload.go). The
// queue itself, and its rules of when a name is due and when the
// uploader wakes, are internal/pending's (c.queue); the loop is
// internal/writeback's (c.loops).

import (
	"context"
	"strings"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/pending"
)

// scheduleLocked queues name's upload after delay (sooner if it is
// already queued sooner), and wakes the waiters; it wakes the uploader
// only if this is due before it would wake anyway (pending.Queue.Schedule).
func (c *Cache) scheduleLocked(name string, delay time.Duration) {
	wake := c.queue.Schedule(name, time.Now().Add(delay))
	close(c.changed)
	c.changed = make(chan struct{})
	if wake {
		c.kickLocked()
	}
}

func (c *Cache) kickLocked() { c.loops.Kick() }

// writebackLedger is the cache as the write-back's loops and waits see it
// (writeback.Ledger): the uploader's methods here, the flushes' in
// writeback.go.
type writebackLedger struct{ c *Cache }

// Upload sends name once (upload.go).
func (l writebackLedger) Upload(ctx context.Context, name string) { l.c.upload(ctx, name) }

// Abandon clears the uploading mark TakeDue set on name's entry.
func (l writebackLedger) Abandon(name string) {
	l.c.mu.Lock()
	if e := l.c.entries[name]; e != nil {
		e.Uploading = false
	}
	l.c.mu.Unlock()
}

// Done ends the transfer of name that TakeDue took.
func (l writebackLedger) Done(name string) {
	l.c.mu.Lock()
	l.c.queue.Done(name)
	l.c.notifyLocked() // a successor of the name, or a directory rename, may wait for it
	l.c.mu.Unlock()
}

// Checkpoint applies the journal to bbolt.
func (l writebackLedger) Checkpoint() error { return l.c.j.Update(nil) }

// CountHidden counts the passthrough writers' growth (space.go).
func (l writebackLedger) CountHidden() { l.c.countHidden() }

// mustWaitLocked reports whether e's change (of name) must not be sent
// now, however due: TakeDue leaves it queued, and takeUpload, which runs
// later (once the upload has a slot), puts it back. The end of what it
// waits for queues the name again (or wakes the uploader).
func (c *Cache) mustWaitLocked(e *entry, name string) bool {
	switch {
	case c.quiet.Covers(name):
		// A directory rename is listing and planning: it goes on when
		// the rename is made.
		return true
	case c.heldLocked(e):
		// A pending copy of this name's bucket version is not made yet:
		// changing the name would destroy its source. Its end queues
		// the name again.
		return true
	case e.Rec.Deleted && strings.HasSuffix(name, "/") && c.overlay.ChangedUnder(name, c.changeLocked):
		// A directory's placeholder goes after the changes under it (the
		// deletions of its files, above all): while objects under it are
		// in the bucket, the directory would show again through them
		// once the placeholder is gone.
		return true
	}
	return false
}

// TakeDue takes the uploads that are due off the queue and marks them
// running; it returns when the next one is due (pending.Queue.TakeDue).
func (l writebackLedger) TakeDue() (due []string, next time.Time) {
	c := l.c
	c.mu.Lock()
	defer c.mu.Unlock()
	due, next = c.queue.TakeDue(time.Now(), c.sendableLocked)
	for _, name := range due {
		c.entries[name].Uploading = true
	}
	return due, next
}

// sendableLocked decides what TakeDue makes of queued name: dropped, left
// waiting, or sent once due and no transfer of the name runs (the queue
// keeps a name in flight once at most: a transfer of an entry a rename
// replaced counts too).
func (c *Cache) sendableLocked(name string) pending.Verdict {
	e := c.entries[name]
	switch {
	case e == nil || !e.Rec.Dirty || e.Dropped || e.Rec.HeldWhy() != "":
		return pending.Drop // a held file waits for Resolve (checksum.go, refusal.go)
	case e.Writers > 0 && !e.Forced:
		return pending.Drop // the last writer's Close queues it again
	case e.Uploading:
		// Queued again while its transfer runs: wait for it to end, so
		// that the bucket sees the name's changes in order.
		return pending.Wait
	case c.mustWaitLocked(e, name):
		return pending.Wait
	}
	return pending.Ready
}
