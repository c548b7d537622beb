package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/report"
	"github.com/bucketfs/bucketfs/cache/internal/verify"
	"github.com/bucketfs/bucketfs/transfer"
)

// A Fetcher makes the downloads of one cache's copies and counts what
// they fetch. Its fields are set once, before its first use.
type Fetcher struct {
	Bucket      transfer.Bucket
	ChunkSize   int64              // bytes per range request; the unit of presence and sums
	MinRange    int64              // transfer.DownloadOptions.MinRange
	Parallelism int                // range requests in flight per download
	WholeMax    int64              // objects up to this size are fetched whole from the first read; 0: all
	Priority    *transfer.Priority // the readers' fetches first, over all downloads
	Log         *slog.Logger
	WG          *sync.WaitGroup // counts the walks' ends (Walk), which Close waits for

	fetched [transfer.NumFetchReasons]atomic.Int64 // bytes fetched, by why
}

// Count counts n bytes fetched for why: every download's
// DownloadOptions.OnFetched, and a handle's own fetches.
func (fe *Fetcher) Count(why transfer.FetchReason, n int64) {
	if why >= 0 && why < transfer.NumFetchReasons {
		fe.fetched[why].Add(n)
	}
}

// Fetched is what Count counted, by why.
func (fe *Fetcher) Fetched() report.FetchedBytes {
	return report.FetchedBytes{
		Read:      fe.fetched[transfer.FetchRead].Load(),
		Readahead: fe.fetched[transfer.FetchReadahead].Load(),
		Whole:     fe.fetched[transfer.FetchWhole].Load(),
		Warm:      fe.fetched[transfer.FetchWarm].Load(),
	}
}

// Whole reports whether the download of an object of size bytes, opened
// for why (WholeWhy), is fetched whole from its first read.
func (fe *Fetcher) Whole(why transfer.FetchReason, size int64) bool {
	return why == transfer.FetchWarm || fe.WholeMax <= 0 || size <= fe.WholeMax
}

// Make gives fl a download of the missing chunks of the copy rec
// describes (name's), whose data file is at path, fetching nothing yet:
// reads fetch what they need, and Walk starts the background walk of the
// rest. It reads the version the copy's content is: name's own, or,
// while a copy is pending, its source (Fill.Source). If the chunk size
// changed since rec was written (the last mount), everything is fetched
// again: rec's present chunks, sums and checked are cleared. Called under the owner's
// lock, on a fill with no download; opening the file is quick local I/O
// done under it so that two opens cannot make two downloads.
func (fe *Fetcher) Make(fl *Fill, path, name string, rec *durable.Record, checked *verify.Checked) error {
	if rec.LocalContent() || rec.Complete {
		return fmt.Errorf("internal error: download of %s, whose copy is complete or has local changes", name)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("opening cache file: %w", err)
	}
	present, sums := rec.PresentBools(), rec.AllSums()
	if rec.ChunkSize != fe.ChunkSize {
		present, sums = nil, nil
		rec.ChunkSize = fe.ChunkSize
		rec.Sums, rec.Present, *checked = nil, nil, nil // in the old chunks' units: nothing is present in the new ones
	}
	fl.src, fl.gen = name, rec.Generation
	if rec.PendingCopy() {
		fl.src, fl.gen = rec.CopyFrom, rec.CopyGen
	}
	do := transfer.DownloadOptions{ChunkSize: fe.ChunkSize, MinRange: fe.MinRange, Parallelism: fe.Parallelism, Sums: sums,
		CRC32C: rec.CRC32C, CheckCRC: rec.CRC32C != 0, StoredBytes: rec.Encoding != "", Logger: fe.Log,
		Priority: fe.Priority, OnFetched: fe.Count}
	fl.dl, fl.file, fl.idle = transfer.NewDownload(fe.Bucket, fl.src, fl.gen, rec.Size, f, present, do), f, true
	return nil
}

type warmKey struct{}

// Warming marks ctx as the open of 'bucketfs warm': the object is
// fetched whole, whatever its size, for transfer.FetchWarm.
func Warming(ctx context.Context) context.Context { return context.WithValue(ctx, warmKey{}, true) }

// WholeWhy is the reason of a whole fetch an open with ctx starts.
func WholeWhy(ctx context.Context) transfer.FetchReason {
	if ctx.Value(warmKey{}) != nil {
		return transfer.FetchWarm
	}
	return transfer.FetchWhole
}

// prefetchKey marks the context of a prefetch's acquire: no eviction, no
// uncached fallback.
type prefetchKey struct{}

// ForPrefetch marks ctx as a prefetch's (Prefetch does).
func ForPrefetch(ctx context.Context) context.Context {
	return context.WithValue(ctx, prefetchKey{}, true)
}

// Prefetching reports whether ctx is a prefetch's.
func Prefetching(ctx context.Context) bool { return ctx.Value(prefetchKey{}) != nil }

// ErrNoRoom is why a prefetch fetched nothing: the cache has no free room
// for it without evicting.
var ErrNoRoom = errors.New("no free room in the cache for a prefetch")
