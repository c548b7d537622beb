package cache

// The uploader's scheduling: what each queued name waits for, and the
// loop that starts due uploads (upload.go). The queue itself, and its
// rules of when a name is due and when the uploader wakes, are
// internal/pending's (c.queue).

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

func (c *Cache) kickLocked() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// startUploader runs the loop that starts due uploads.
func (c *Cache) startUploader() {
	life, cancel := context.WithCancel(context.Background())
	c.stopUpload = cancel
	c.startCleaner(life)
	sem := make(chan struct{}, c.opts.UploadParallelism)
	c.uploadWG.Add(1)
	go func() {
		defer c.uploadWG.Done()
		timer := time.NewTimer(time.Hour)
		defer timer.Stop()
		for {
			if !c.waitOnline(life) { // offline.go
				return
			}
			due, next := c.takeDue()
			for _, name := range due {
				c.uploadWG.Add(1)
				go func() {
					defer c.uploadWG.Done()
					defer func() {
						c.mu.Lock()
						c.queue.Done(name)
						c.notifyLocked() // a successor of the name, or a directory rename, may wait for it
						c.mu.Unlock()
					}()
					select {
					case sem <- struct{}{}:
						defer func() { <-sem }()
						c.upload(life, name)
					case <-life.Done():
						c.mu.Lock()
						if e := c.entries[name]; e != nil {
							e.uploading = false
						}
						c.mu.Unlock()
					}
				}()
			}
			wait := pending.Idle
			if !next.IsZero() {
				wait = time.Until(next)
			}
			timer.Reset(wait)
			select {
			case <-life.Done():
				return
			case <-c.kick:
			case <-timer.C:
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}()
}

// mustWaitLocked reports whether e's change (of name) must not be sent
// now, however due: takeDue leaves it queued, and takeUpload, which runs
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
	case e.rec.Deleted && strings.HasSuffix(name, "/") && c.changedUnderLocked(name):
		// A directory's placeholder goes after the changes under it (the
		// deletions of its files, above all): while objects under it are
		// in the bucket, the directory would show again through them
		// once the placeholder is gone.
		return true
	}
	return false
}

// takeDue takes the uploads that are due off the queue and marks them
// running; it returns when the next one is due (pending.Queue.TakeDue).
func (c *Cache) takeDue() (due []string, next time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	due, next = c.queue.TakeDue(time.Now(), c.sendableLocked)
	for _, name := range due {
		c.entries[name].uploading = true
	}
	return due, next
}

// sendableLocked decides what takeDue makes of queued name: dropped, left
// waiting, or sent once due and no transfer of the name runs (the queue
// keeps a name in flight once at most: a transfer of an entry a rename
// replaced counts too).
func (c *Cache) sendableLocked(name string) pending.Verdict {
	e := c.entries[name]
	switch {
	case e == nil || !e.rec.Dirty || e.dropped || e.rec.HeldWhy() != "":
		return pending.Drop // a held file waits for Resolve (checksum.go, refusal.go)
	case e.writers > 0 && !e.forced:
		return pending.Drop // the last writer's Close queues it again
	case e.uploading:
		// Queued again while its transfer runs: wait for it to end, so
		// that the bucket sees the name's changes in order.
		return pending.Wait
	case c.mustWaitLocked(e, name):
		return pending.Wait
	}
	return pending.Ready
}
