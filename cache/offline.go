package cache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/upload"
	"github.com/bucketfs/bucketfs/transfer"
)

// While the bucket is offline (Options.Online), the uploader starts no
// upload: changes stay queued, and are sent when it is back, by
// themselves. An upload cut short by the outage is queued again without
// counting as a failed try (it failed for no fault of its own).

// waitOnline blocks until the bucket is online, and reports false if life
// ends first.
func (c *Cache) waitOnline(life context.Context) bool {
	if c.opts.Online == nil {
		return true
	}
	select {
	case <-c.opts.Online():
		return true
	case <-life.Done():
		return false
	}
}

// offlineLocked queues again the upload of e that failed because the
// bucket went offline, and reports whether err was that.
func (c *Cache) offlineLocked(e *entry, err error) bool {
	if !errors.Is(err, transfer.ErrOffline) {
		return false
	}
	c.log.Debug("upload waits for the bucket to be back", "object", e.name, "err", err)
	c.scheduleLocked(e.name, upload.OfflineRetry)
	return true
}

// HasRecords reports whether the cache directory dir holds records of
// cached objects of bucket: what an offline start (a mount whose bucket
// is unreachable) can serve. It only reads the index, and fails if
// another process holds it.
func HasRecords(dir, bucket string) (bool, error) {
	return durable.HasRecords(dir, bucket)
}

// offlineErr is the error of FlushName while the bucket is offline: the
// change is safe in the cache and queued, but not in the bucket, and an
// fsync that asked for the bucket must not hang for the whole outage.
func (c *Cache) offlineErr(name string) error {
	if c.opts.Online == nil {
		return nil
	}
	select {
	case <-c.opts.Online():
		return nil
	default:
		return fmt.Errorf("%s is not in the bucket yet (it is kept in the cache and sent when the bucket is back): %w", name, transfer.ErrOffline)
	}
}

// offlineTick wakes FlushName to look at the bucket's state again (going
// offline signals nothing by itself); nil without Options.Online.
func (c *Cache) offlineTick() <-chan time.Time {
	if c.opts.Online == nil {
		return nil
	}
	return time.After(time.Second)
}
