package cache

// Conflict copies: a local version whose upload the bucket refused
// because another writer replaced the object it was based on is saved
// beside that object, as NAME.bucketfs-conflict-TIME (objmeta.ConflictName).
//
// The copy carries what an upload at the name would have carried: the
// custom metadata (mode, owner, extended attributes), the file's
// modification time (MtimeKey, from the cache file as for any upload),
// the content type and encoding, and an upload ID of its own
// (AttemptKey). The ID and the copy's name are written to the journal
// before the copy is sent (record.SavingAs), so that a try whose answer
// was lost (the request took effect, the connection broke before the
// answer; or the process died) is found in the bucket by the next try and
// confirmed, not made a second time under the next second's name.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/objmeta"
	"github.com/bucketfs/bucketfs/transfer"
)

// maxCopyNames bounds the names a conflict copy tries when the ones
// before are taken (by copies of other versions made in the same
// second).
const maxCopyNames = 20

// saveConflict uploads u's local version beside the object that changed
// in the bucket (see the top of this file). If the local copy did not
// change meanwhile, it is then dropped from the cache, so the name shows
// the remote version again.
func (c *Cache) saveConflict(ctx context.Context, u uploadJob, body fileSums, mtime time.Time) error {
	e, name := u.e, u.name
	sibling := c.earlierCopy(ctx, u, body, mtime)
	if sibling != "" {
		c.log.Info("the bucket already holds the conflict copy of this file from a try whose answer was lost: confirmed without sending it again",
			"object", name, "copy", sibling)
	} else {
		var err error
		if sibling, err = c.sendCopy(ctx, u, body, mtime); err != nil {
			return fmt.Errorf("saving the local version of %s beside a changed remote object: %w", name, err)
		}
	}
	c.log.Warn("the object changed in the bucket while it had local changes: the remote version stays, the local version was saved beside it",
		"object", name, "local_version_saved_as", sibling)
	if sa, err := c.b.Stat(ctx, sibling); err == nil {
		c.confirm(sibling, sa, false)
	}
	ra, err := c.b.Stat(ctx, name)
	known := err == nil || errors.Is(err, transfer.ErrNotExist) // what the name shows now
	gone := err != nil
	if known {
		c.confirm(name, ra, gone)
		c.noteConflict(name, ra, gone, false)
	}
	c.mu.Lock()
	c.stats.Conflicts++
	c.noteErrorLocked("conflict", name, fmt.Errorf("the object changed in the bucket; the local version was saved as %s", sibling))
	e.uploading = false
	e.rec.SavingAs = "" // confirmed: a change made since is another version, saved under a name of its own
	var victims []*entry
	// Newer changes (or a writer that may make them) are still based on
	// the old generation: they go beside it too, on the next try.
	settled := c.settleLocked(e, name, u.version, u.inflight, e.writers == 0)
	if settled {
		victims = c.dropLocked(e)
	}
	c.notifyLocked()
	c.mu.Unlock()
	c.removeAll(victims)
	if settled && known {
		c.noteConflict(name, ra, gone, true)
	}
	return nil
}

// sendCopy sends u's local version as a new object beside u's name,
// under the first conflict name not taken, and returns that name. Every
// try carries the same upload ID, recorded with the name before it is
// sent. A name found taken by this very copy (a try whose answer was
// lost, sent again by the client's retry) is the copy.
func (c *Cache) sendCopy(ctx context.Context, u uploadJob, body fileSums, mtime time.Time) (string, error) {
	now := time.Now()
	attempt := objmeta.NewAttemptID()
	var err error
	for try := 1; try <= maxCopyNames; try++ {
		sibling := objmeta.ConflictName(u.name, now, try)
		if err = c.recordAttempt(u.e, attempt, sibling); err != nil {
			return "", err
		}
		o := body.Put(transfer.PutOptions{IfGenerationMatch: 0, ContentType: u.contentType, ContentEncoding: u.encoding,
			Metadata: objmeta.ForUpload(u.meta, mtime, attempt)})
		_, err = c.sender.Send(ctx, sibling, u.id, u.size, u.src, o)
		if !errors.Is(err, transfer.ErrPrecondition) {
			return sibling, err
		}
		if live, serr := c.b.Stat(ctx, sibling); c.ownCopy(u, body, mtime, live, serr) {
			return sibling, nil
		}
	}
	return "", err
}

// earlierCopy returns the name of the conflict copy of u's local version
// that an earlier try put in the bucket unconfirmed, if the record names
// one (SavingAs) and the object there is it (ownCopy); else "". It costs
// one Stat, and only after a try of a copy that was not confirmed.
func (c *Cache) earlierCopy(ctx context.Context, u uploadJob, body fileSums, mtime time.Time) string {
	c.mu.Lock()
	as := u.e.rec.SavingAs
	c.mu.Unlock()
	if as == "" {
		return ""
	}
	if live, err := c.b.Stat(ctx, as); c.ownCopy(u, body, mtime, live, err) {
		return as
	}
	return ""
}

// ownCopy reports whether live (what a Stat answered, with err) was
// written by one of the tries recorded for u's entry and holds exactly
// what u sends: for the cache file, what sameUpload compares; for a
// server-side copy, the same size and custom metadata.
func (c *Cache) ownCopy(u uploadJob, body fileSums, mtime time.Time, live transfer.ObjectAttrs, err error) bool {
	if err != nil {
		return false
	}
	c.mu.Lock()
	ours := objmeta.WrittenBy(live.Metadata, u.e.rec.Attempts)
	c.mu.Unlock()
	if !ours {
		return false
	}
	if u.src.From != "" {
		return live.Size == u.size && objmeta.SameMeta(live.Metadata, u.meta, mtime)
	}
	return c.sameUpload(u, body, mtime, live)
}
