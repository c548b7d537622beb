package cache

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/transfer"
)

// Large files go up in parts (Options.Large). A parallel upload stages its
// parts in the bucket under a prefix of its own before it puts the whole
// into place; the prefix is recorded in the index before the first part
// leaves, and forgotten only once everything under it is gone. A crash in
// between leaves the record, and the next start cleans up (aborts the
// multipart upload, deletes the staged objects).

// LargeUploader sends a big file in parts; transfer.Parallel implements
// it (the contracts are on its methods).
type LargeUploader interface {
	Put(ctx context.Context, name string, r io.ReaderAt, size int64, o transfer.PutOptions, staging string) (transfer.ObjectAttrs, error)
	Clean(ctx context.Context, staging string) error
}

// recordStaging notes staging in the index (a synced commit).
func (c *Cache) recordStaging(staging, object string) error {
	if err := durable.PutStaging(c.db, staging, object); err != nil {
		return fmt.Errorf("recording the staging prefix of an upload in the cache index: %w", err)
	}
	return nil
}

// cleanStaging removes what an upload staged, and then its record. On
// failure the record stays, and the cleaner tries again later.
func (c *Cache) cleanStaging(ctx context.Context, staging string) {
	err := c.opts.Large.Clean(ctx, staging)
	if err == nil {
		err = durable.DeleteStaging(c.db, staging)
	}
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("cleaning up the parts of an upload failed; trying again later", "staging", staging, "err", err)
			c.kickCleaner()
		}
	}
}

// kickCleaner wakes the cleaner without waiting.
func (c *Cache) kickCleaner() {
	select {
	case c.cleanKick <- struct{}{}:
	default:
	}
}

// cleanerRetry is how long the cleaner waits after a failed round.
const cleanerRetry = time.Minute

// startCleaner runs the loop that cleans up the staging prefixes left in
// the index: by a crash (at start) or by a cleanup that failed.
func (c *Cache) startCleaner(life context.Context) {
	if c.opts.Large == nil {
		return
	}
	c.kickCleaner() // prefixes left by the last run
	c.uploadWG.Add(1)
	go func() {
		defer c.uploadWG.Done()
		for {
			select {
			case <-life.Done():
				return
			case <-c.cleanKick:
			}
			if c.cleanRound(life) > 0 {
				t := time.NewTimer(cleanerRetry)
				select {
				case <-life.Done():
					t.Stop()
					return
				case <-t.C:
					c.kickCleaner()
				}
			}
		}
	}()
}

// CleanStaging cleans up now, within ctx, the staging prefixes that no
// running upload owns (left by a crash, or by a cleanup that failed and
// waits for its retry), rather than leaving them to the background
// cleaner: an unmount calls it after Flush, so that a clean unmount
// leaves no parts in the bucket and no staging records in the index.
func (c *Cache) CleanStaging(ctx context.Context) error {
	if c.opts.Large == nil {
		return nil
	}
	if n := c.cleanRound(ctx); n > 0 {
		return fmt.Errorf("%d uploads' staged parts are not cleaned up; the next start tries again", n)
	}
	return nil
}

// cleanRound cleans every staging prefix in the index that no upload of
// this run owns, and returns how many are left.
func (c *Cache) cleanRound(ctx context.Context) int {
	c.cleanMu.Lock() // the background cleaner and CleanStaging
	defer c.cleanMu.Unlock()
	recs, err := durable.LoadStaging(c.db) // an unreadable note still names its prefix
	if err != nil {
		c.log.Warn("reading the staging prefixes from the cache index failed", "err", err)
		return max(len(recs), 1)
	}
	left := 0
	for staging, r := range recs {
		c.mu.Lock()
		live := c.liveStaging[staging]
		c.mu.Unlock()
		if live {
			continue // a running upload's: it cleans up after itself
		}
		if err := c.opts.Large.Clean(ctx, staging); err != nil {
			if ctx.Err() == nil {
				c.log.Warn("cleaning up the parts of an interrupted upload failed; trying again later", "staging", staging, "object", r.Object, "err", err)
			}
			left++
			continue
		}
		err := durable.DeleteStaging(c.db, staging)
		if err != nil {
			left++
			continue
		}
		c.log.Info("cleaned up the parts of an interrupted upload", "staging", staging, "object", r.Object)
	}
	return left
}
