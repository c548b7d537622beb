package cache

import (
	"context"
	"slices"
	"time"

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

// Rebased reports whether a, a version of name this cache confirms, is
// the upload of content that a rename replaced, which landed after the
// rename: the name's record, the renamed content not yet uploaded, is
// now based on a (supersededDuring), and from is the generation it was
// based on before. A file node that follows that content holds from
// (what Rename returned) and must hold a's generation now, or the
// content's upload, based on a, is not recognised as the node's
// (OnConfirmed's function, OwnUpload) and the node opens a version gone.
func (c *Cache) Rebased(name string, a transfer.ObjectAttrs) (from int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[name]
	// Once the content is uploaded, its record holds a newer generation:
	// generations only grow, so rebasedTo never matches again.
	if e == nil || e.dropped || e.rebasedFrom == 0 || e.rebasedTo != a.Generation || e.rec.Generation != a.Generation {
		return 0, false
	}
	return e.rebasedFrom, true
}

// earlierUpload settles, before u sends anything, an upload of local
// content whose earlier tries went unconfirmed (their answers were lost:
// a crash, an outage, a cut connection). If the bucket's live version is
// one of those tries and holds exactly what u would send (sameUpload),
// it is adopted as u's result, nothing is sent, and done is true. If it
// is one of those tries with other bytes or metadata, u goes on, based
// on its generation (returned as base): the bucket has it, so the
// upload replaces it instead of failing its precondition and sending
// everything a second time. Otherwise u goes on as it was. It costs one
// Stat, and only when the record has unconfirmed tries.
func (c *Cache) earlierUpload(ctx context.Context, u uploadJob, body fileSums, mtime time.Time) (base int64, done bool) {
	c.mu.Lock()
	unconfirmed := len(u.e.rec.Attempts) > 0
	c.mu.Unlock()
	if !unconfirmed || u.src.From != "" {
		return u.base, false
	}
	live, err := c.b.Stat(ctx, u.name)
	gen, ours := c.ownVersionOf(u.e, live, err)
	if !ours {
		return u.base, false
	}
	if c.sameUpload(u, body, mtime, live) {
		c.adoptUpload(ctx, u, body, live)
		return u.base, true
	}
	c.mu.Lock()
	if u.e.rec.Generation == u.base {
		u.e.rec.Generation = gen
	}
	c.mu.Unlock()
	return gen, false
}

// sameUpload reports whether live, a version of u's name written by one
// of its unconfirmed tries, is exactly what u sends: the same size and
// CRC32C as the body scanned for it, the same custom metadata but the
// upload ID, the same content encoding. Without the body's sum (a file
// that could not be read) nothing is the same.
func (c *Cache) sameUpload(u uploadJob, body fileSums, mtime time.Time, live transfer.ObjectAttrs) bool {
	if !body.OK || live.Size != u.size || live.CRC32C != body.Whole || live.ContentEncoding != u.encoding {
		return false
	}
	return objmeta.SameMeta(live.Metadata, u.meta, mtime)
}

// adoptUpload settles u with live, its own earlier try that the bucket
// holds, as if u had sent it.
func (c *Cache) adoptUpload(ctx context.Context, u uploadJob, body fileSums, live transfer.ObjectAttrs) {
	if c.supersededDuring(u.e, u.name, u.base, live, nil) {
		return
	}
	c.log.Info("the bucket already holds this file from an upload whose answer was lost: confirmed without sending it again",
		"object", u.name, "generation", live.Generation)
	c.confirm(u.name, live, false) // before the change leaves the local overlay
	c.uploadDone(ctx, u, body, live, nil)
}
