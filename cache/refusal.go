package cache

// Uploads the bucket refuses. transfer classifies the answer once; the
// uploader acts on the class:
//   - ErrInvalid (400): the bucket will not take the request (an object
//     name it does not take, say), and trying again changes nothing. GCS
//     answers a body whose checksum is not the one sent with 400 too (a
//     body damaged on its way, or changed while it was read), so the
//     file is held only after invalidLimit such refusals in a row with
//     nothing changed between: held as a damaged file is (record.Refused:
//     not uploaded, not removed, named by Status under Held, by Flush
//     and by the held-files metric) until 'bucketfs resolve'. Its reads
//     and writes go on: its bytes are not in doubt.
//   - ErrPermission, ErrUnauthenticated, ErrBucketNotExist, and ErrTooBig
//     found before sending (a file the kernel wrote past 5 TiB): a person
//     can fix it (credentials, the bucket, the file). The upload is tried again every
//     upload.PermanentRetry, and meanwhile the file is named loudly: an error in
//     the log at each refusal, Status.Refused ('bucketfs status'), the
//     refused-files metric; and a flush returns with it named instead of
//     waiting (entry.RefusedAt).
// All fields used here are the entry's, guarded by Cache.mu.

import (
	"errors"
	"fmt"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// invalidLimit is how many refusals as invalid in a row, with the file
// unchanged, hold it.
const invalidLimit = 3

// ErrRefused means the bucket refused a file's upload: as invalid (the
// file is held until 'bucketfs resolve'), or for a reason a person can
// fix (it is tried again every few minutes).
var ErrRefused = errors.New("the bucket refused the upload")

// fixableRefusal reports whether err is a refusal a person can fix.
func fixableRefusal(err error) bool {
	return errors.Is(err, ErrTooBig) || errors.Is(err, transfer.ErrPermission) || errors.Is(err, transfer.ErrUnauthenticated) || errors.Is(err, transfer.ErrBucketNotExist)
}

// invalidLocked counts an upload of u refused as invalid (err), and holds
// the file once the refusal has come invalidLimit times in a row with the
// file unchanged. It reports whether it held it (the caller then
// persists the record and logs it, without the lock).
func (c *Cache) invalidLocked(e *entry, u uploadJob, err error) bool {
	if !errors.Is(err, transfer.ErrInvalid) {
		e.Invalids = 0
		return false
	}
	if e.Version != u.Version || e.Inflight != 0 || u.Inflight != 0 || e.Dropped || e.Rec.Deleted {
		e.Invalids = 0 // changed meanwhile: the next try sends other bytes
		return false
	}
	e.Invalids++
	if e.Invalids < invalidLimit {
		return false
	}
	e.Invalids = 0
	e.Rec.Refused = err.Error()
	c.stats.UploadFailures++
	c.noteErrorLocked("upload", e.Name, fmt.Errorf("%w (held): %v", ErrRefused, err))
	return true
}

// holdRefused records that e is held for an upload the bucket refused as
// invalid (snapshot rec, number seq), and says so in the log.
func (c *Cache) holdRefused(e *entry, rec record, seq uint64) {
	c.log.Error("the bucket refused the upload as invalid, the same way several times: the file is held, not uploaded, not removed. Keep the local bytes (upload again) or take the bucket's version with bucketfs resolve",
		"object", e.Name, "err", rec.Refused)
	if err := c.persistEntry(e, rec, seq); err != nil {
		c.log.Warn("recording a held file in the cache index failed; it is tried again at the next start", "object", e.Name, "err", err)
	}
}

// refusedLocked notes a refusal of e's upload that a person can fix
// (err), for Status, the metric and Flush.
func (c *Cache) refusedLocked(e *entry, err error) {
	e.RefusedAt, e.RefusedWhy = time.Now(), err.Error()
}
