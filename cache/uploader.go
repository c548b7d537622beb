package cache

// The uploader's scheduling: the queue of dirty names, when each is due,
// and the loop that starts due uploads (upload.go).

import (
	"context"
	"sort"
	"strings"
	"time"
)

// scheduleLocked queues name's upload after delay (sooner if it is
// already queued sooner).
func (c *Cache) scheduleLocked(name string, delay time.Duration) {
	at := time.Now().Add(delay)
	if cur, ok := c.queue[name]; !ok || at.Before(cur) {
		c.queue[name] = at
	}
	close(c.changed)
	c.changed = make(chan struct{})
	// Wake the uploader only if this is due before it would wake anyway:
	// a rescan of the queue per queued file costs its square.
	if c.nextDue.IsZero() || at.Before(c.nextDue) {
		c.nextDue = at
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
						delete(c.inFlight, name)
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
			wait := time.Hour
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
	case c.quiet.covers(name):
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
// running; it returns when the next one is due.
func (c *Cache) takeDue() (due []string, next time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for name, at := range c.queue {
		e := c.entries[name]
		switch {
		case e == nil || !e.rec.Dirty || e.dropped || e.rec.HeldWhy() != "":
			delete(c.queue, name) // a held file waits for Resolve (checksum.go, refusal.go)
		case e.writers > 0 && !e.forced:
			delete(c.queue, name) // the last writer's Close queues it again
		case e.uploading || c.inFlight[name]:
			// Queued again while a transfer of the name runs (this
			// entry's, or one of an entry a rename replaced): wait for
			// it to end, so that the bucket sees the name's changes in
			// order.
		case c.mustWaitLocked(e, name):
		case !at.After(now):
			delete(c.queue, name)
			e.uploading = true
			c.inFlight[name] = true
			due = append(due, name)
		case next.IsZero() || at.Before(next):
			next = at
		}
	}
	sort.Strings(due)
	c.nextDue = next
	if next.IsZero() {
		c.nextDue = now.Add(time.Hour) // when the idle uploader looks again
	}
	return due, next
}
