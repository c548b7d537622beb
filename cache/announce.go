package cache

// RemoteChanged is told that another writer changed name in the bucket,
// as the bucket's notifications announced it: generation gen is there
// now, or (gone) generation gen was deleted. A local change of name not
// yet uploaded and not based on that version is queued to go at once:
// its upload, refused by its precondition, saves it beside the other
// writer's version now (saveConflict) rather than at its write-back
// delay, so that the conflict shows while the writer is still at work.
// It reports whether name has such a change, and whether its copy is
// pinned (the caller fetches the new version again; warm.go).
func (c *Cache) RemoteChanged(name string, gen int64, gone bool) (conflict, pinned bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[name]
	if e == nil || e.dropped {
		return false, false
	}
	if e.rec.Dirty {
		if gone && gen < e.rec.Generation || !gone && gen <= e.rec.Generation {
			return false, false // news of the version it is based on, or older
		}
		c.scheduleLocked(name, 0)
		return true, false
	}
	return false, e.rec.Pinned && e.rec.Generation != gen
}
