package cache

// Waiting for a change of state under Cache.mu: notifyLocked signals one,
// waitLocked waits for a condition.

import "context"

// waitLocked waits, with c.mu held (released while waiting), until ok
// says so; ok runs under c.mu.
func (c *Cache) waitLocked(ctx context.Context, ok func() bool) error {
	for !ok() {
		c.waiters++
		// Not c.changed: the waiters would wake one another for ever.
		close(c.waited)
		c.waited = make(chan struct{})
		wake := c.changed
		c.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			c.mu.Lock()
			c.waiters--
			return ctx.Err()
		}
		c.mu.Lock()
		c.waiters--
	}
	return nil
}

// notifyLocked wakes whoever waits for a change of write-back state: the
// uploader (once, however many changes), Flush waiters, and the writers
// waiting for room (a copy made clean is evictable; room.go).
func (c *Cache) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
	c.budget.Wake()
	c.kickLocked()
}
