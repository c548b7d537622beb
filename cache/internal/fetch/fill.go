package fetch

import (
	"context"
	"os"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/verify"
	"github.com/bucketfs/bucketfs/transfer"
)

// Fill is the filling of one copy: its download, running or not yet
// retired, and whether a prefetch made the copy. Its owner guards it (in
// package cache, Cache.mu, one per entry); the zero value has no
// download.
type Fill struct {
	dl         *transfer.Download
	file       *os.File // dl's destination
	src        string   // the name dl reads (Source)
	gen        int64    // and its generation
	idle       bool     // dl's background walk has not started, or has ended
	prefetched bool     // made by a prefetch, not opened since
}

// Download is the copy's download, running or not yet retired; nil if
// none.
func (fl *Fill) Download() *transfer.Download { return fl.dl }

// Source is the version the download reads: the copy's own, or a
// pending copy's source.
func (fl *Fill) Source() (string, int64) { return fl.src, fl.gen }

// Complete reports whether the download has fetched every chunk (its
// copy is complete once it is retired).
func (fl *Fill) Complete() bool { return fl.dl != nil && closed(fl.dl.Complete()) }

// Walking reports whether the download's background walk runs.
func (fl *Fill) Walking() bool { return fl.dl != nil && !fl.idle }

// Idle reports whether the copy has a download whose walk has not
// started or has ended: the last release retires it.
func (fl *Fill) Idle() bool { return fl.dl != nil && fl.idle }

// Take detaches the download and its file, if any, for retiring or
// stopping (nil, nil if none). The fill has none after it.
func (fl *Fill) Take() (*transfer.Download, *os.File) {
	dl, f := fl.dl, fl.file
	fl.dl, fl.file = nil, nil
	return dl, f
}

// Ended marks the walk of dl ended (for Ledger.Ended) and reports
// whether dl is to be retired: no handle holds the copy (unheld) or it
// has every chunk. A dl no longer the fill's (taken meanwhile) changes
// nothing: the fill's own download, if another, may be walking.
func (fl *Fill) Ended(dl *transfer.Download, unheld bool) bool {
	if fl.dl != dl {
		return false
	}
	fl.idle = true
	return unheld || closed(dl.Complete())
}

// Made marks a new copy as made for a prefetch if ctx is one's; before
// any open can find it.
func (fl *Fill) Made(ctx context.Context) { fl.prefetched = Prefetching(ctx) }

// Used is size, the bytes of a prefetched copy, the first time an open
// (not another prefetch, ctx) takes it: they count as used. 0 otherwise.
func (fl *Fill) Used(ctx context.Context, size int64) int64 {
	if !fl.prefetched || Prefetching(ctx) {
		return 0
	}
	fl.prefetched = false
	return size
}

// Wasted is size, the bytes of a prefetched copy that leaves the cache
// (evicted, dropped, or the cache closed) before any open took it; 0
// otherwise.
func (fl *Fill) Wasted(size int64) int64 {
	if !fl.prefetched {
		return 0
	}
	fl.prefetched = false
	return size
}

// Unprefetched is told that the prefetch that made the copy fetched
// nothing usable: it does not count as prefetched.
func (fl *Fill) Unprefetched() { fl.prefetched = false }

// Absorb records what dl fetched into the copy's record: the chunks
// present and their sums. Chunks it fetched (and summed) count as
// checked for this process; a chunk it does not hold, as not checked.
// Called under the owner's lock, for a copy with no local changes.
func Absorb(rec *durable.Record, checked *verify.Checked, dl *transfer.Download) {
	present, summed, sums := dl.Snapshot()
	before := rec.PresentBools()
	for i, p := range present {
		if p && (i >= len(before) || !before[i]) && summed[i] {
			checked.Set(i, rec.Chunks(), true)
		}
		if !p {
			checked.Set(i, rec.Chunks(), false)
		}
	}
	rec.SetPresent(present)
	rec.SetSums(present, summed, sums)
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
