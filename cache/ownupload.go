package cache

import (
	"slices"

	"github.com/bucketfs/bucketfs/transfer"
)

// OwnUpload reports whether version a of name is the upload of the
// name's local content that this cache is confirming now (its upload ID
// is one the name's record holds), and the generation that upload
// replaced (its base). OnConfirmed's function asks it to tell
// this cache's own versions (which the file system's nodes follow) from
// another writer's (a conflict's remote version, one taken by resolve).
func (c *Cache) OwnUpload(name string, a transfer.ObjectAttrs) (base int64, ok bool) {
	id := a.Metadata[AttemptKey]
	if id == "" {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[name]
	if e == nil || e.dropped || !slices.Contains(e.rec.Attempts, id) {
		return 0, false
	}
	return e.rec.Generation, true
}
