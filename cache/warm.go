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
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/fetch"
	"github.com/bucketfs/bucketfs/cache/internal/warm"
	"github.com/bucketfs/bucketfs/transfer"
)

// The walk of a warm (listing the objects, checking that they fit,
// fetching them some at a time, its progress and report) is package
// internal/warm's; these are its names for the callers of package cache
// (cmd/bucketfs, internal/control), and warmTarget is what it fills.

// WarmOptions shape a warm.
type WarmOptions = warm.Options

// DefaultWarmParallelism is how many objects a warm fetches at once.
const DefaultWarmParallelism = warm.DefaultParallelism

// WarmProgress is how far a warm is.
type WarmProgress = warm.Progress

// WarmError is one object a warm could not fill.
type WarmError = warm.Error

// WarmReport is what a warm did.
type WarmReport = warm.Report

// NoRoomError means the objects a warm was asked for do not fit in the
// cache beside the copies it cannot evict (changed files and pinned
// copies of other names). It matches ErrNoSpace.
type NoRoomError = warm.NoRoomError

// warmer is the walk of a warm over c.
func (c *Cache) warmer() warm.Warmer {
	return warm.Warmer{Cache: warmTarget{c}, Bucket: c.b, MaxSize: c.opts.MaxSize, NoSpace: ErrNoSpace}
}

// Warm fills the cache with every object under prefixes (object names,
// "" for the whole bucket), o.Parallelism at a time, pinning them with
// o.Pin. Before fetching anything it checks that they fit (a
// *NoRoomError if not). A copy already complete is not fetched again.
// A failure of one object is reported in the result, not returned;
// progress is called as objects end (from several goroutines, one call
// at a time).
func (c *Cache) Warm(ctx context.Context, prefixes []string, o WarmOptions, progress func(WarmProgress)) (WarmReport, error) {
	return c.warmer().Warm(ctx, prefixes, o, progress)
}

// WarmVersion makes the copy of version a complete and pins it, as
// Warm does for each object it lists: a pinned file replaced in the
// bucket (the caller heard so from the bucket's notifications) is
// fetched again.
func (c *Cache) WarmVersion(ctx context.Context, a transfer.ObjectAttrs) error {
	_, err := c.warmer().One(ctx, a, true)
	return err
}

// warmTarget is the cache as a warm fills it (warm.Cache), and its pins
// as they are ended and counted (warm.Pins).
type warmTarget struct{ c *Cache }

// Kept sums the charges of the entries outside names that no eviction
// takes: pinned copies, changed files, files being uploaded.
func (t warmTarget) Kept(names map[string]bool) int64 {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	var kept int64
	for name, e := range c.entries {
		if !names[name] && (e.Rec.Pinned || e.Rec.Dirty || e.Uploading) {
			kept += e.Charged
		}
	}
	return kept
}

// Complete reports whether the cache holds a complete copy of version a
// (or local changes of it), pinning it with pin and marking it used,
// without opening it.
func (t warmTarget) Complete(a transfer.ObjectAttrs, pin bool) bool {
	c := t.c
	c.mu.Lock()
	e := c.entries[a.Name]
	ok := e != nil && isClosed(e.Ready) && e.Err == nil && e.Rec.Damaged == "" &&
		(e.Rec.LocalContent() || (e.Rec.Complete && e.Rec.Generation == a.Generation))
	if ok {
		c.lru.MoveToFront(e.Elem)
		e.Rec.LastAccess = time.Now().UnixNano()
	}
	c.mu.Unlock()
	if ok && pin {
		c.setPin(e, true)
	}
	return ok
}

// Fill opens version a for 'bucketfs warm' (fetched whole), promotes a
// download another open made (fetching what is read) to a warm's, and
// waits for it to complete. Its bytes are checked as any download's are
// (per-chunk sums, the object's CRC32C).
func (t warmTarget) Fill(ctx context.Context, a transfer.ObjectAttrs, pin bool, opened func()) (bool, error) {
	c := t.c
	// As Open does, keeping the entry: its download is running when
	// newHandle returns.
	e, err := c.acquire(fetch.Warming(ctx), a, false)
	var h *Handle
	if err == nil && e != nil {
		h, err = c.newHandle(e, transfer.FetchWarm)
	}
	opened()
	if err != nil {
		return false, err
	}
	if e == nil {
		return false, fmt.Errorf("%s (%d bytes): %w", a.Name, a.Size, ErrNoSpace)
	}
	defer h.Close()
	already := h.Complete()
	if !already {
		c.promote(e, h.Download(), transfer.FetchWarm) // made by another open, fetching what is read
		if err := h.Download().EnsureComplete(ctx); err != nil {
			// Not pinned: a pinned partial copy would keep its full size
			// from eviction for a version that may be gone.
			return false, staleOr(err)
		}
	}
	// Pinned once complete; until then the open handle keeps it.
	if pin {
		c.setPin(e, true)
	}
	return already, nil
}

// setPin sets e's pin and records it.
func (c *Cache) setPin(e *entry, pin bool) {
	c.mu.Lock()
	if e.Rec.Pinned == pin || e.Dropped || e.Rec.ID == 0 {
		c.mu.Unlock()
		return
	}
	e.Rec.Pinned = pin
	if !pin {
		c.budget.Wake() // evictable now: writers waiting for room take it
	}
	rec, seq := e.Snapshot()
	c.mu.Unlock()
	if err := c.persistEntry(e, rec, seq); err != nil {
		// The pin holds for this run; the next start may not know it.
		c.log.Warn("recording a pin failed", "object", e.Name, "pinned", pin, "err", err)
	}
}

// Unpin ends the pins of the copies under prefixes (see Warm) and
// returns how many there were and their bytes (warm.Unpin). They stay
// cached, and may be evicted like any copy.
func (c *Cache) Unpin(prefixes []string) (int, int64) {
	return warm.Unpin[*entry](warmTarget{c}, prefixes)
}

// warnPinnedOverCap says so when pinned copies keep the cache over
// Options.MaxSize after the start's eviction (warm.WarnOverCap).
func (c *Cache) warnPinnedOverCap() { warm.WarnOverCap[*entry](warmTarget{c}, c.opts.MaxSize, c.log) }

// Pinned lists the pinned entries under, with their charges and all
// the entries' (warm.Pins).
func (t warmTarget) Pinned(under func(name string) bool) (es []*entry, bytes, used int64) {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, e := range c.entries {
		if e.Rec.Pinned && under(name) {
			es = append(es, e)
			bytes += e.Charged
		}
	}
	return es, bytes, c.budget.Used()
}

// Unpin is setPin(e, false) (warm.Pins).
func (t warmTarget) Unpin(e *entry) { t.c.setPin(e, false) }
