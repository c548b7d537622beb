package fs

// Prefetch of the next small files of a directory. When files of one
// directory are opened for reading one after another, in the order its
// listing gave them (cat d/*, grep -r, tar, cp -r), the next ones are
// fetched into the cache in parallel before they are opened: a cold
// file then costs no round trip at its open. Bounds: a file size limit,
// a count and a byte window ahead of the last open per directory, a
// fixed number of fetches in flight, and the cache's free room (a
// prefetch never evicts, cache.Prefetch). An open that breaks the order
// cancels what the directory had queued.

import (
	"container/list"
	"context"
	"errors"
	"sort"
	"strings"
	"sync"

	"github.com/bucketfs/bucketfs/cache"
	"github.com/bucketfs/bucketfs/fs/names"
	"github.com/bucketfs/bucketfs/transfer"
)

// PrefetchOptions bound the prefetch of small files. Files == 0 turns it
// off.
type PrefetchOptions struct {
	Files    int   // files fetched ahead of the last open, per directory
	MaxSize  int64 // largest file prefetched
	Window   int64 // bytes fetched ahead of the last open, per directory
	Parallel int   // prefetches in flight over the whole mount
}

// Defaults of PrefetchOptions.
const (
	DefaultPrefetchFiles    = 64
	DefaultPrefetchMaxSize  = 1 << 20
	DefaultPrefetchWindow   = 16 << 20
	DefaultPrefetchParallel = 32
	prefetchDirs            = 256     // directories whose listing order is remembered
	prefetchNames           = 200_000 // and the names of their listings, at most (held by them: the name cache may have let them go)
	prefetchFirst           = 4       // files fetched ahead after an open of a directory's first file
)

// prefetcher decides and runs the prefetches of one mount.
type prefetcher struct {
	o     PrefetchOptions
	c     *cache.Cache
	fsys  *FS
	ctx   context.Context // cancelled by stop
	stopF context.CancelFunc
	wg    sync.WaitGroup // the workers

	mu      sync.Mutex // a leaf: held with no other lock, never across I/O
	dirs    map[string]*pfDir
	lru     *list.List // of *pfDir, most recently used at the front
	names   int        // the entries of the listings of dirs
	queue   []pfJob
	wake    *sync.Cond // on mu: a job was queued, or stop
	stopped bool
}

// pfDir is one directory's listing order and where its reader is.
// Positions are those of the listing's entries; only regular files are
// fetched.
type pfDir struct {
	prefix   string
	order    pfOrder
	first    int // position of the first regular file
	last     int // position of the last open; -1 for none
	frontier int // first position not yet queued
	epoch    int // bumped when the order breaks: queued jobs of older epochs are dropped
	elem     *list.Element
}

type pfJob struct {
	d     *pfDir // nil: a pinned file to fetch again (rewarm)
	epoch int
	a     transfer.ObjectAttrs
}

func newPrefetcher(f *FS, c *cache.Cache, o PrefetchOptions) *prefetcher {
	p := &prefetcher{o: o, c: c, fsys: f, dirs: map[string]*pfDir{}, lru: list.New()}
	p.wake = sync.NewCond(&p.mu)
	p.ctx, p.stopF = context.WithCancel(context.Background())
	if o.Files <= 0 {
		return p
	}
	for range max(o.Parallel, 1) {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.work()
		}()
	}
	return p
}

// stop cancels the prefetches running and waits for the workers.
func (p *prefetcher) stop() {
	p.mu.Lock()
	p.stopped = true
	p.queue = nil
	p.wake.Broadcast()
	p.mu.Unlock()
	p.stopF()
	p.wg.Wait()
}

// StopPrefetch stops the prefetches: call it once the mount is gone,
// before closing the cache. Calling it again does nothing.
func (f *FS) StopPrefetch() {
	f.prefetch.stop()
}

// pfOrder is a directory's entries in listing order.
type pfOrder interface {
	Len() int
	// file returns the attributes of the entry at position i if it is a
	// regular file.
	file(i int) (transfer.ObjectAttrs, bool)
	// pos returns the position of object name.
	pos(name string) (int, bool)
}

// listingOrder is the order of a listing: its sorted names. It holds the
// listing the name cache made, not a copy of its attributes.
type listingOrder struct {
	prefix string
	l      *names.Listing
	names  []string // l.Names()
}

func (o listingOrder) Len() int { return len(o.names) }

func (o listingOrder) file(i int) (transfer.ObjectAttrs, bool) {
	c := o.l.Child(o.names[i])
	if c.Kind != names.File || isSymlink(c.Attrs) {
		return transfer.ObjectAttrs{}, false
	}
	return c.Attrs, true
}

func (o listingOrder) pos(name string) (int, bool) {
	seg, ok := strings.CutPrefix(name, o.prefix)
	if !ok {
		return 0, false
	}
	i := sort.SearchStrings(o.names, seg)
	return i, i < len(o.names) && o.names[i] == seg
}

// listed records the order in which a listing of prefix gives its files.
func (p *prefetcher) listed(prefix string, l *names.Listing) {
	if p.o.Files <= 0 {
		return
	}
	p.listedOrder(prefix, listingOrder{prefix: prefix, l: l, names: l.Names()})
}

// listedOrder is listed, given the directory's order.
func (p *prefetcher) listedOrder(prefix string, order pfOrder) {
	d := &pfDir{prefix: prefix, order: order, last: -1}
	for d.first = 0; d.first < order.Len(); d.first++ {
		if _, ok := order.file(d.first); ok {
			break
		}
	}
	n := order.Len()
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.dirs[prefix]; old != nil {
		// Listed again (ls, a rewind): keep where the reader is. The jobs
		// queued for the old listing follow the new one, so that an open
		// out of order still drops them.
		// Positions are the old listing's: the new one may be shorter
		// (files deleted meanwhile), so they are held to it.
		d.last, d.frontier, d.epoch = min(old.last, n-1), min(old.frontier, n), old.epoch
		p.lru.Remove(old.elem)
		p.names -= old.order.Len()
		for i := range p.queue {
			if p.queue[i].d == old {
				p.queue[i].d = d
			}
		}
	}
	p.dirs[prefix] = d
	d.elem = p.lru.PushFront(d)
	p.names += n
	for p.lru.Len() > prefetchDirs || p.names > prefetchNames && p.lru.Len() > 1 {
		gone := p.lru.Remove(p.lru.Back()).(*pfDir)
		gone.epoch++
		p.names -= gone.order.Len()
		delete(p.dirs, gone.prefix)
	}
}

// opened is told of every open for reading of object name. An open of
// the directory's first file fetches a few files ahead; a second open in
// listing order within the window starts (or moves on) the prefetch of
// the files after it; an open out of order cancels what was queued.
func (p *prefetcher) opened(name string) {
	if p.o.Files <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.dirs[parentOf(name)]
	if d == nil || p.stopped {
		return
	}
	i, ok := d.order.pos(name)
	if !ok {
		return
	}
	p.lru.MoveToFront(d.elem)
	sequential := d.last >= 0 && i > d.last && i-d.last <= p.o.Files
	first := d.last < 0 && i == d.first
	d.last = i
	switch {
	case sequential:
		p.queueAheadLocked(d, i, p.o.Files)
	case first:
		// The first file of the listing: likely a walk (cat d/*, tar,
		// cp -r) starting. A few files ahead, so that the second open
		// does not wait; the full window once it comes in order.
		d.epoch++
		d.frontier = i + 1
		p.queueAheadLocked(d, i, min(p.o.Files, prefetchFirst))
	default:
		d.epoch++ // the pattern stopped: drop what is queued
		d.frontier = i + 1
	}
}

// queueAheadLocked queues the files after position i, up to files of
// them, that fit the byte window and are not queued yet.
func (p *prefetcher) queueAheadLocked(d *pfDir, i, files int) {
	d.frontier = max(d.frontier, i+1)
	var ahead int64
	for j := i + 1; j < d.frontier; j++ {
		if a, ok := d.order.file(j); ok && a.Size <= p.o.MaxSize {
			ahead += a.Size
		}
	}
	queued := false
	for ; d.frontier < d.order.Len() && d.frontier-i <= files; d.frontier++ {
		a, ok := d.order.file(d.frontier)
		if !ok || a.Size > p.o.MaxSize || a.Size <= 0 {
			continue
		}
		if ahead+a.Size > p.o.Window {
			break
		}
		ahead += a.Size
		p.queue = append(p.queue, pfJob{d: d, epoch: d.epoch, a: a})
		queued = true
	}
	if queued {
		p.wake.Broadcast()
	}
}

// next returns the next job whose directory still reads in order; false
// once stopped.
func (p *prefetcher) next() (pfJob, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for len(p.queue) > 0 {
			j := p.queue[0]
			p.queue = p.queue[1:]
			if j.d == nil {
				return j, true
			}
			if i, ok := j.d.order.pos(j.a.Name); ok && j.epoch == j.d.epoch && j.d.last < i {
				return j, true
			}
		}
		if p.stopped {
			return pfJob{}, false
		}
		p.wake.Wait()
	}
}

func (p *prefetcher) work() {
	for {
		j, ok := p.next()
		if !ok {
			return
		}
		if j.d == nil {
			if err := p.c.WarmVersion(p.ctx, j.a); err != nil && !errors.Is(err, context.Canceled) {
				p.fsys.log.Warn("fetching again a pinned file replaced in the bucket failed; it is fetched on its next use", "object", j.a.Name, "err", err)
			}
			continue
		}
		if _, err := p.c.Prefetch(p.ctx, j.a); err != nil && !errors.Is(err, context.Canceled) {
			// The open of that file meets the failure again and says so.
			p.fsys.log.Debug("prefetch failed", "object", j.a.Name, "err", err)
		}
	}
}

// rewarm queues version a of a pinned file, replaced in the bucket, to
// be fetched whole again and pinned (fs.Announce). It reports false if
// the prefetcher runs no workers (--prefetch=false) or is stopped.
func (p *prefetcher) rewarm(a transfer.ObjectAttrs) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || p.o.Files <= 0 {
		return false
	}
	p.queue = append(p.queue, pfJob{a: a})
	p.wake.Broadcast()
	return true
}

// parentOf is the prefix of the directory object name is in.
func parentOf(name string) string {
	return name[:strings.LastIndexByte(name, '/')+1]
}
