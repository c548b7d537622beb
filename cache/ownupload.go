package cache

// This cache's own versions in the bucket, as the file system asks about
// them once they are confirmed (OwnUpload, Rebased). Finding an upload's
// own earlier tries in the bucket is package internal/upload's (own.go).

import (
	"github.com/bucketfs/bucketfs/cache/internal/objmeta"
	"github.com/bucketfs/bucketfs/transfer"
)

// OwnUpload reports whether version a of name is the upload of the
// name's local content that this cache is confirming now (its upload ID
// is one the name's record holds), and the generation that upload
// replaced (its base). OnConfirmed's function asks it to tell
// this cache's own versions (which the file system's nodes follow) from
// another writer's (a conflict's remote version, one taken by resolve).
func (c *Cache) OwnUpload(name string, a transfer.ObjectAttrs) (base int64, ok bool) {
	if a.Metadata[AttemptKey] == "" {
		return 0, false // not an upload of a bucketfs: no lock taken
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[name]
	if e == nil || e.Dropped || !objmeta.WrittenBy(a.Metadata, e.Rec.Attempts) {
		return 0, false
	}
	return e.Rec.Generation, true
}

// Rebased reports whether a, a version of name this cache confirms, is
// the upload of content that a rename replaced, which landed after the
// rename: the name's record, the renamed content not yet uploaded, is
// now based on a (supersededLocked), and from is the generation it was
// based on before. A file node that follows that content holds from
// (what Rename returned) and must hold a's generation now, or the
// content's upload, based on a, is not recognised as the node's
// (OnConfirmed's function, OwnUpload) and the node opens a version gone.
func (c *Cache) Rebased(name string, a transfer.ObjectAttrs) (from int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[name]
	// Once the content is uploaded, its record holds a newer generation:
	// generations only grow, so RebasedTo never matches again.
	if e == nil || e.Dropped || e.RebasedFrom == 0 || e.RebasedTo != a.Generation || e.Rec.Generation != a.Generation {
		return 0, false
	}
	return e.RebasedFrom, true
}
