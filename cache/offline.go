package cache

import (
	"errors"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/upload"
	"github.com/bucketfs/bucketfs/transfer"
)

// While the bucket is offline (Options.Online), the uploader starts no
// upload: changes stay queued, and are sent when it is back, by
// themselves; FlushName fails at once (internal/writeback: offline.go).
// An upload cut short by the outage is queued again without counting as
// a failed try (it failed for no fault of its own).

// offlineLocked queues again the upload of e that failed because the
// bucket went offline, and reports whether err was that.
func (c *Cache) offlineLocked(e *entry, err error) bool {
	if !errors.Is(err, transfer.ErrOffline) {
		return false
	}
	c.log.Debug("upload waits for the bucket to be back", "object", e.Name, "err", err)
	c.scheduleLocked(e.Name, upload.OfflineRetry)
	return true
}

// HasRecords reports whether the cache directory dir holds records of
// cached objects of bucket: what an offline start (a mount whose bucket
// is unreachable) can serve. It only reads the index, and fails if
// another process holds it.
func HasRecords(dir, bucket string) (bool, error) {
	return durable.HasRecords(dir, bucket)
}
