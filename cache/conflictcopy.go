package cache

// Conflict copies: a local version whose upload the bucket refused
// because another writer replaced the object it was based on is saved
// beside that object, as NAME.bucketfs-conflict-TIME (objmeta.ConflictName).
// Saving it (the copy's name, the upload ID and name recorded before it
// is sent, a try whose answer was lost found and confirmed) is package
// internal/upload's (conflict.go); what becomes of the entry once the
// copy is in the bucket is conflictDone.

import "fmt"

// conflictDone settles u's local version, saved beside its name as
// sibling: if the local copy did not change meanwhile (and no writer
// may change it), it is dropped from the cache, so the name shows the
// remote version again; it reports whether it was.
func (c *Cache) conflictDone(u uploadJob, sibling string) bool {
	e, name := u.Entry, u.Name
	c.mu.Lock()
	c.stats.Conflicts++
	c.noteErrorLocked("conflict", name, fmt.Errorf("the object changed in the bucket; the local version was saved as %s", sibling))
	e.Uploading = false
	e.Rec.SavingAs = "" // confirmed: a change made since is another version, saved under a name of its own
	var victims []*entry
	// Newer changes (or a writer that may make them) are still based on
	// the old generation: they go beside it too, on the next try.
	settled := c.settleLocked(e, name, u.Version, u.Inflight, e.Writers == 0)
	if settled {
		victims = c.dropLocked(e)
	}
	c.notifyLocked()
	c.mu.Unlock()
	c.removeAll(victims)
	return settled
}
