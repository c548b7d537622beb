package cache

// What a download fetches: a whole object, or what is read. Objects up
// to Options.WholeMax are fetched whole from their first read: small
// ones cost little, and a complete copy is what lets later reads stay
// local and the kernel read the file directly (passthrough). A larger
// object is fetched as it is read: the chunks a read touches (at once,
// ahead of anything in the background: transfer.Priority) and, for a
// handle reading in order, the next chunk ahead of it. It becomes a
// whole fetch once the reads show it will be read broadly: a handle has
// read a whole chunk in order (a copy, a scan, a media player; a quarter
// of a chunk if it began at the start, as whole-file readers do), or a
// quarter of the object's chunks are present. So a reader of a file's
// footer or index (Parquet, ORC, zip, MP4 do that first) fetches a chunk
// or two, not the object (the rules are package internal/readpattern's;
// a handle acts on them: package internal/read, through promote).
// 'bucketfs warm' fetches whole objects, whatever their size.

import (
	"context"

	"github.com/bucketfs/bucketfs/transfer"
)

// countFetched is every download's DownloadOptions.OnFetched.
func (c *Cache) countFetched(why transfer.FetchReason, n int64) {
	if why >= 0 && why < transfer.NumFetchReasons {
		c.fetched[why].Add(n)
	}
}

func (c *Cache) fetchedBytes() FetchedBytes {
	return FetchedBytes{
		Read:      c.fetched[transfer.FetchRead].Load(),
		Readahead: c.fetched[transfer.FetchReadahead].Load(),
		Whole:     c.fetched[transfer.FetchWhole].Load(),
		Warm:      c.fetched[transfer.FetchWarm].Load(),
	}
}

type warmKey struct{}

// warming marks ctx as the open of 'bucketfs warm': the object is
// fetched whole, whatever its size, for transfer.FetchWarm.
func warming(ctx context.Context) context.Context { return context.WithValue(ctx, warmKey{}, true) }

// wholeWhy is the reason of a whole fetch an open with ctx starts.
func wholeWhy(ctx context.Context) transfer.FetchReason {
	if ctx.Value(warmKey{}) != nil {
		return transfer.FetchWarm
	}
	return transfer.FetchWhole
}

// wholeFromStart reports whether an object of size bytes is fetched
// whole from its first read.
func (c *Cache) wholeFromStart(size int64) bool {
	return c.opts.WholeMax <= 0 || size <= c.opts.WholeMax
}

// startWholeLocked makes e's download and starts its walk at once, for
// why.
func (c *Cache) startWholeLocked(e *entry, why transfer.FetchReason) error {
	if err := c.newDownloadLocked(e); err != nil {
		return err
	}
	c.walkLocked(e, why)
	return nil
}

// promote starts the walk of dl, e's download, unless it was retired
// meanwhile.
func (c *Cache) promote(e *entry, dl *transfer.Download, why transfer.FetchReason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.dl == dl {
		c.walkLocked(e, why)
	}
}
