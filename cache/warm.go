package cache

// Warming: filling the cache with every object under some prefixes
// ahead of their reads ('bucketfs warm'), and pins, which keep copies
// from eviction until they are unpinned.
//
// A pin is record.Pinned: it is persisted with the record (it survives a
// remount), an evicting walk skips it, and the copy counts against
// Options.MaxSize like any other. A pinned object changed or replaced in
// the bucket is handled as an unpinned one is (its old copy goes at the
// next open that sees the new generation); the new version's copy
// inherits the pin, and is filled by that open or by the next warm. A
// pinned object deleted in the bucket keeps its copy, pinned, until
// Unpin (nothing reads it: the name is gone). Deleting or renaming the
// file through the mount ends its pin (a rename makes a new record).

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// WarmOptions shape a warm.
type WarmOptions struct {
	Parallelism int  // objects fetched at once (each big one in parallel ranges as well)
	Pin         bool // pin every copy warmed (or found warm)
}

// DefaultWarmParallelism is how many objects a warm fetches at once.
const DefaultWarmParallelism = 128

// warmOpens bounds the opens (record, data file, download start) a warm
// runs at once: with 128 files created at once in one directory, the
// daemon spent a third of its CPU time in the kernel's openat, spinning
// on the directory's lock; the fetches stay 128 in flight.
const warmOpens = 8

// WarmProgress is how far a warm is.
type WarmProgress struct {
	Files        int   `json:"files"` // objects done (fetched, found warm or failed)
	TotalFiles   int   `json:"total_files"`
	Bytes        int64 `json:"bytes"` // bytes of the objects done
	TotalBytes   int64 `json:"total_bytes"`
	AlreadyFiles int   `json:"already_files"` // objects whose copy was complete before
	AlreadyBytes int64 `json:"already_bytes"`
	Failed       int   `json:"failed"`
	FailedBytes  int64 `json:"failed_bytes"`
}

// WarmError is one object a warm could not fill.
type WarmError struct {
	Object string `json:"object"`
	Err    string `json:"err"`
}

// WarmReport is what a warm did.
type WarmReport struct {
	WarmProgress
	Errors []WarmError `json:"errors,omitempty"` // at most maxWarmErrors of the failures (Failed counts all)
}

// maxWarmErrors bounds the failures a report names: a warm of many
// objects while the bucket is away fails them all, and the report must
// still fit in one reply of the control socket.
var maxWarmErrors = 1000

// NoRoomError means the objects a warm was asked for do not fit in the
// cache beside the copies it cannot evict (changed files and pinned
// copies of other names). It matches ErrNoSpace.
type NoRoomError struct {
	Need  int64 // the objects' bytes plus those kept
	Kept  int64 // bytes of copies that cannot be evicted, outside the set
	Max   int64 // Options.MaxSize
	Short int64 // Need - Max
}

func (e *NoRoomError) Error() string {
	return fmt.Sprintf("the objects do not fit in the cache: they need %d bytes beside the %d bytes of changed or pinned files kept, the cache holds %d; %d bytes are missing (raise --cache-max-size, or unpin)",
		e.Need-e.Kept, e.Kept, e.Max, e.Short)
}

func (e *NoRoomError) Is(target error) bool { return target == ErrNoSpace }

// underAny reports whether object name is one of prefixes or under one
// of them as a directory; "" is the whole bucket.
func underAny(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if p == "" || name == p || strings.HasPrefix(name, p+"/") {
			return true
		}
	}
	return false
}

// listUnder lists every object under prefixes (see underAny), once each,
// biggest first so that the long fetches start at once. Directory
// placeholders ("dir/") are left out.
func (c *Cache) listUnder(ctx context.Context, prefixes []string) ([]transfer.ObjectAttrs, error) {
	seen := map[string]bool{}
	var out []transfer.ObjectAttrs
	for _, p := range prefixes {
		err := transfer.ListAll(ctx, c.b, transfer.ListQuery{Prefix: p}, listParallel, func(page transfer.ListPage) error {
			for _, a := range page.Objects {
				if strings.HasSuffix(a.Name, "/") || seen[a.Name] || !underAny(a.Name, []string{p}) {
					continue
				}
				seen[a.Name] = true
				out = append(out, a)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing %q: %w", p, err)
		}
	}
	sort.Slice(out, func(i, j int) bool { // pages come in any order: by name where sizes tie
		return out[i].Size > out[j].Size || out[i].Size == out[j].Size && out[i].Name < out[j].Name
	})
	return out, nil
}

// roomFor checks that objs fit in the cache beside what it cannot evict.
func (c *Cache) roomFor(objs []transfer.ObjectAttrs) error {
	in := make(map[string]bool, len(objs))
	var need int64
	for _, a := range objs {
		in[a.Name] = true
		need += a.Size
	}
	c.mu.Lock()
	var kept int64
	for name, e := range c.entries {
		if !in[name] && (e.rec.Pinned || e.rec.Dirty || e.uploading) {
			kept += e.charged
		}
	}
	c.mu.Unlock()
	if need+kept > c.opts.MaxSize {
		return &NoRoomError{Need: need + kept, Kept: kept, Max: c.opts.MaxSize, Short: need + kept - c.opts.MaxSize}
	}
	return nil
}

// Warm fills the cache with every object under prefixes (object names,
// "" for the whole bucket), o.Parallelism at a time, pinning them with
// o.Pin. Before fetching anything it checks that they fit (a
// *NoRoomError if not). A copy already complete is not fetched again.
// A failure of one object is reported in the result, not returned;
// progress is called as objects end (from several goroutines, one call
// at a time).
func (c *Cache) Warm(ctx context.Context, prefixes []string, o WarmOptions, progress func(WarmProgress)) (WarmReport, error) {
	if o.Parallelism < 1 {
		o.Parallelism = DefaultWarmParallelism
	}
	objs, err := c.listUnder(ctx, prefixes)
	if err != nil {
		return WarmReport{}, err
	}
	if err := c.roomFor(objs); err != nil {
		return WarmReport{}, err
	}
	var r WarmReport
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
			already, err := c.warmOne(ctx, a, o.Pin, opening)
			mu.Lock()
			defer mu.Unlock()
			r.Files++
			r.Bytes += a.Size
			switch {
			case err != nil:
				r.Failed++
				r.FailedBytes += a.Size
				if len(r.Errors) < maxWarmErrors {
					r.Errors = append(r.Errors, WarmError{Object: a.Name, Err: err.Error()})
				}
			case already:
				r.AlreadyFiles++
				r.AlreadyBytes += a.Size
			}
			if progress != nil {
				progress(r.WarmProgress)
			}
		}()
	}
	wg.Wait()
	sort.Slice(r.Errors, func(i, j int) bool { return r.Errors[i].Object < r.Errors[j].Object })
	return r, ctx.Err()
}

// WarmVersion makes the copy of version a complete and pins it, as
// Warm does for each object it lists: a pinned file replaced in the
// bucket (the caller heard so from the bucket's notifications) is
// fetched again.
func (c *Cache) WarmVersion(ctx context.Context, a transfer.ObjectAttrs) error {
	_, err := c.warmOne(ctx, a, true, make(chan struct{}, 1))
	return err
}

// warmOne makes the copy of version a complete (pinned with pin), and
// reports whether it was complete already. Its bytes are checked as any
// download's are (per-chunk sums, the object's CRC32C).
func (c *Cache) warmOne(ctx context.Context, a transfer.ObjectAttrs, pin bool, opening chan struct{}) (bool, error) {
	if c.warmAlready(a, pin) {
		return true, nil
	}
	select {
	case opening <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	h, err := c.Open(warming(ctx), a) // its download is running when it returns
	<-opening
	if err != nil {
		return false, err
	}
	defer h.Close()
	if h.e == nil {
		return false, fmt.Errorf("%s (%d bytes): %w", a.Name, a.Size, ErrNoSpace)
	}
	already := h.complete
	if !already {
		c.promote(h.e, h.dl, transfer.FetchWarm) // made by another open, fetching what is read
		if err := h.dl.EnsureComplete(ctx); err != nil {
			// Not pinned: a pinned partial copy would keep its full size
			// from eviction for a version that may be gone.
			return false, staleOr(err)
		}
	}
	// Pinned once complete; until then the open handle keeps it.
	if pin {
		c.setPin(h.e, true)
	}
	return already, nil
}

// warmAlready reports whether the cache holds a complete copy of version
// a (or local changes of it), pinning it with pin and marking it used,
// without opening it.
func (c *Cache) warmAlready(a transfer.ObjectAttrs, pin bool) bool {
	c.mu.Lock()
	e := c.entries[a.Name]
	ok := e != nil && isClosed(e.ready) && e.err == nil && e.rec.Damaged == "" &&
		(e.rec.LocalContent() || (e.rec.Complete && e.rec.Generation == a.Generation))
	if ok {
		c.lru.MoveToFront(e.elem)
		e.rec.LastAccess = time.Now().UnixNano()
	}
	c.mu.Unlock()
	if ok && pin {
		c.setPin(e, true)
	}
	return ok
}

// setPin sets e's pin and records it.
func (c *Cache) setPin(e *entry, pin bool) {
	c.mu.Lock()
	if e.rec.Pinned == pin || e.dropped || e.rec.ID == 0 {
		c.mu.Unlock()
		return
	}
	e.rec.Pinned = pin
	rec, seq := c.snapshotLocked(e)
	c.mu.Unlock()
	if err := c.persistEntry(e, rec, seq); err != nil {
		// The pin holds for this run; the next start may not know it.
		c.log.Warn("recording a pin failed", "object", e.name, "pinned", pin, "err", err)
	}
}

// Unpin ends the pins of the copies under prefixes (see Warm) and
// returns how many there were and their bytes. They stay cached, and may
// be evicted like any copy.
func (c *Cache) Unpin(prefixes []string) (int, int64) {
	c.mu.Lock()
	var es []*entry
	var bytes int64
	for name, e := range c.entries {
		if e.rec.Pinned && underAny(name, prefixes) {
			es = append(es, e)
			bytes += e.charged
		}
	}
	c.mu.Unlock()
	for _, e := range es {
		c.setPin(e, false)
	}
	return len(es), bytes
}

// warnPinnedOverCap says so when the cache is over Options.MaxSize after
// the start's eviction because of pinned copies (pinned under a larger
// --cache-max-size): nothing new is cached until they are unpinned, and
// writes wait for room that never comes (ENOSPC after FullWait).
func (c *Cache) warnPinnedOverCap() {
	c.mu.Lock()
	used := c.budget.Used()
	var files int
	var bytes int64
	for _, e := range c.entries {
		if e.rec.Pinned {
			files++
			bytes += e.charged
		}
	}
	c.mu.Unlock()
	if used > c.opts.MaxSize && files > 0 {
		c.log.Warn("pinned copies keep the cache over its size: nothing more is cached and writes fail with ENOSPC until 'bucketfs unpin' (or a larger --cache-max-size)",
			"pinned_files", files, "pinned_bytes", bytes, "used_bytes", used, "cache_max_size", c.opts.MaxSize)
	}
}
