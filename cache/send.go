package cache

// Sending a file's content to the bucket is package internal/send: one
// request, parts, or a server-side copy, and the staging prefixes of
// parallel uploads. This file makes the Cache's Sender and runs its
// cleaner among the uploader's goroutines.

import (
	"context"

	"github.com/bucketfs/bucketfs/cache/internal/send"
)

// LargeUploader sends a big file in parts; transfer.Parallel implements
// it (the contracts are on its methods).
type LargeUploader = send.LargeUploader

// newSender makes the Cache's Sender, once the index is open.
func (c *Cache) newSender() *send.Sender {
	return send.New(send.Options{
		Bucket:         c.b,
		Large:          c.opts.Large,
		LargeThreshold: c.opts.LargeThreshold,
		Index:          send.BoltIndex(c.db),
		DataDir:        c.dataDir,
		Logger:         c.log,
	})
}

// startCleaner runs the loop that cleans up the staging prefixes left in
// the index (send.Sender.RunCleaner) until the uploads stop; Close waits
// for it with the uploader (writeback.Loops.StopUploads), before it
// closes the index.
func (c *Cache) startCleaner() {
	if c.opts.Large != nil {
		c.loops.Go(c.sender.RunCleaner)
	}
}

// CleanStaging cleans up now, within ctx, the staging prefixes that no
// running upload owns (left by a crash, or by a cleanup that failed and
// waits for its retry), rather than leaving them to the background
// cleaner: an unmount calls it after Flush, so that a clean unmount
// leaves no parts in the bucket and no staging records in the index.
func (c *Cache) CleanStaging(ctx context.Context) error {
	return c.sender.CleanStaging(ctx)
}
