package warm

import (
	"context"
	"sort"
	"sync"

	"github.com/bucketfs/bucketfs/transfer"
)

// Cache is what a warm needs of the cache it fills. Package cache
// implements it. Its methods are called with no lock of this package
// held, from as many goroutines at once as the warm fetches objects.
type Cache interface {
	// Kept returns the bytes charged to the copies the cache cannot
	// evict (changed files, files being uploaded, pinned copies) whose
	// names are not in names: what the objects of a warm must fit
	// beside. It is a count at one instant; it reserves nothing.
	Kept(names map[string]bool) int64

	// Complete reports whether the cache holds a complete copy of
	// version a (or local changes of its name), without opening it or
	// fetching anything. If so, it marks the copy used and, with pin,
	// pins it.
	Complete(a transfer.ObjectAttrs, pin bool) bool

	// Fill makes the copy of version a complete: it opens the version,
	// has its download fetch all of it whole (as 'bucketfs warm', not as
	// a reader would), and waits until every byte is present and
	// checked. With pin it pins the copy once it is complete, never
	// before: a failed Fill leaves no pin. It reports whether the copy
	// was complete already when it was opened. A version that cannot be
	// cached at all fails (with the cache's no-space error).
	//
	// Fill calls opened exactly once, as soon as its open (the record,
	// the data file, the start of the download) is over, whether it
	// succeeded or not, and before it waits for any byte: the walk holds
	// one of its few open slots until then.
	Fill(ctx context.Context, a transfer.ObjectAttrs, pin bool, opened func()) (already bool, err error)
}

// Options shape a warm.
type Options struct {
	Parallelism int  // objects fetched at once (each big one in parallel ranges as well)
	Pin         bool // pin every copy warmed (or found warm)
}

// DefaultParallelism is how many objects a warm fetches at once.
const DefaultParallelism = 128

// warmOpens bounds the opens (record, data file, download start) a warm
// runs at once: with 128 files created at once in one directory, the
// daemon spent a third of its CPU time in the kernel's openat, spinning
// on the directory's lock; the fetches stay 128 in flight.
const warmOpens = 8

// A Warmer fills one cache with objects of its bucket.
type Warmer struct {
	Cache   Cache           // the cache filled
	Bucket  transfer.Lister // where the objects are listed
	MaxSize int64           // the cache's cap: the most bytes of object data it keeps
	// NoSpace is the error a NoRoomError matches (errors.Is): the
	// cache's own for a file that does not fit.
	NoSpace error
}

// Warm fills the cache with every object under prefixes (object names,
// "" for the whole bucket), o.Parallelism at a time, pinning them with
// o.Pin. Before fetching anything it checks that they fit (a
// *NoRoomError if not). A copy already complete is not fetched again.
// A failure of one object is reported in the result, not returned;
// progress is called as objects end (from several goroutines, one call
// at a time). If ctx ends, the objects not started are left out of the
// counts (Files < TotalFiles) and ctx's error is returned with them.
func (w Warmer) Warm(ctx context.Context, prefixes []string, o Options, progress func(Progress)) (Report, error) {
	if o.Parallelism < 1 {
		o.Parallelism = DefaultParallelism
	}
	objs, err := listUnder(ctx, w.Bucket, prefixes)
	if err != nil {
		return Report{}, err
	}
	if err := w.roomFor(objs); err != nil {
		return Report{}, err
	}
	var r Report
	r.TotalFiles = len(objs)
	for _, a := range objs {
		r.TotalBytes += a.Size
	}
	if progress != nil {
		progress(r.WarmProgress)
	}
	var mu sync.Mutex // guards r, and serialises progress
	sem := make(chan struct{}, o.Parallelism)
	opening := make(chan struct{}, warmOpens)
	var wg sync.WaitGroup
	for _, a := range objs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			already, err := w.one(ctx, a, o.Pin, opening)
			mu.Lock()
			defer mu.Unlock()
			r.count(a, already, err)
			if progress != nil {
				progress(r.WarmProgress)
			}
		}()
	}
	wg.Wait()
	sort.Slice(r.Errors, func(i, j int) bool { return r.Errors[i].Object < r.Errors[j].Object })
	return r, ctx.Err()
}

// One makes the copy of version a complete (pinned with pin), as Warm
// does for each object it lists, and reports whether it was complete
// already. It checks no fit: one object that cannot be cached fails as
// Fill does.
func (w Warmer) One(ctx context.Context, a transfer.ObjectAttrs, pin bool) (bool, error) {
	return w.one(ctx, a, pin, make(chan struct{}, 1))
}

// one makes the copy of version a complete (pinned with pin), and
// reports whether it was complete already, holding a slot of opening
// while the cache opens it. Its bytes are checked as any download's are
// (per-chunk sums, the object's CRC32C): that is the cache's Fill.
func (w Warmer) one(ctx context.Context, a transfer.ObjectAttrs, pin bool, opening chan struct{}) (bool, error) {
	if w.Cache.Complete(a, pin) {
		return true, nil
	}
	select {
	case opening <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	var once sync.Once
	release := func() { once.Do(func() { <-opening }) }
	defer release() // in case Fill broke its contract: a slot lost would stall the walk
	return w.Cache.Fill(ctx, a, pin, release)
}
