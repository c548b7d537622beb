package cache

// RemoteChanged is told that another writer changed name in the bucket,
// as the bucket's notifications announced it: generation gen is there
// now, or (gone) generation gen was deleted. A local change of name not
// yet uploaded and not based on that version goes to the bucket without
// its write-back delay (at once, or at the last close of a writer still
// open, which may not have recorded its change yet): its upload, refused
// by its precondition, saves it beside the other writer's version now
// (internal/upload: conflict.go), so that the conflict shows while the writer is still
// at work. It reports whether name has such a change (or a writer that
// may make one), and whether its copy is pinned (its new version is
// fetched on its next use; warm.go).
func (c *Cache) RemoteChanged(name string, gen int64, gone bool) (conflict, pinned bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[name]
	if e == nil || e.Dropped {
		return false, false
	}
	if e.Rec.Dirty || e.Writers > 0 {
		if gone && gen < e.Rec.Generation || !gone && gen <= e.Rec.Generation {
			return false, false // news of the version it is based on, or older
		}
		e.RemoteMoved = true
		if e.Rec.Dirty {
			c.scheduleLocked(name, 0)
		}
		return true, false
	}
	return false, e.Rec.Pinned && e.Rec.Generation != gen
}
