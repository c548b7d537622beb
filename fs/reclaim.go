package fs

// The kernel's nodes in bounded memory. The kernel keeps every inode it
// has looked up (ls -l, find, du: READDIRPLUS looks up each entry) until
// memory pressure, and go-fuse and this package keep a node for each
// while it does: about 1 KB a name. A walk of ten million names would
// hold ten million nodes. So the mount bounds them: past
// Options.MaxNodes, it asks the kernel to forget the least recently used
// ones, and the kernel's FORGET drops them here (OnForget). A name asked
// for again is looked up again, from the name cache (memory or
// names.db): it costs a FUSE round trip, not a request to the bucket.
//
// The order is a clock: nodes are queued when made; the hand takes the
// oldest; one used since it last passed (a lookup, getattr, open or
// readdir marks it) is requeued; one with handles open is requeued; the
// others are asked for. The kernel is asked with FUSE_NOTIFY_PRUNE
// (Linux >= 6.18: forget these inodes if nothing uses them), else with
// FUSE_NOTIFY_INVAL_ENTRY for files and symbolic links only: an
// invalidated directory that is some process's working directory would
// make getcwd fail, while a pruned one is left alone by the kernel. A
// file opened between the hand's look and the kernel's invalidation then
// shows as "(deleted)" in /proc/PID/fd until closed; its data and name
// are unaffected.
//
// Notifications are sent from the clock's own goroutine, never from a
// FUSE request: the kernel takes the directory's lock to invalidate an
// entry, which a request in that directory may hold.
//
// Asks wait for a moment with no lookup in flight (gate.go).
//
// reclaimer.mu is a leaf (LOCK ORDER, fs.go): held only around the queue.

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// clockLink is a node's place in the clock's queue. Nodes embed it and
// set node when they are made (enqueue).
type clockLink struct {
	prev, next *clockLink // guarded by reclaimer.mu
	node       clockNode  // the node that embeds the link
	used       atomic.Bool
	queued     bool         // guarded by reclaimer.mu
	droppedAt  atomic.Int64 // when the hand first saw it unknown to the kernel (UnixNano; 0: not so)
}

// clockNode is what the clock asks of a node.
type clockNode interface {
	EmbeddedInode() *gofs.Inode
	// clockBusy: handles are open on it; not asked for.
	clockBusy() bool
	// clockDir: a directory (not invalidated by name: see above).
	clockDir() bool
	// clockDropped: go-fuse never registered the node (it answered a
	// lookup with another node): undo what making it did.
	clockDropped()
}

// touch marks the node used: the hand passes it over once.
func (l *clockLink) touch() { l.used.Store(true) }

// reclaimer is the clock of one mount.
type reclaimer struct {
	max int // nodes held before the oldest are asked for; 0: no bound
	log *slog.Logger

	mu      sync.Mutex
	head    clockLink // sentinel: head.next is the newest, head.prev the oldest
	n       int       // guarded by mu: nodes queued
	started bool      // guarded by mu
	stopped bool      // guarded by mu

	kick    chan struct{}
	done    chan struct{}
	noPrune atomic.Bool // the kernel has no FUSE_NOTIFY_PRUNE
	gate    entryGate   // lookups in flight: asks wait for none (gate.go)

	asked atomic.Int64 // nodes the hand asked the kernel to forget
}

func (r *reclaimer) init(max int, log *slog.Logger) {
	r.max, r.log = max, log
	r.head.next, r.head.prev = &r.head, &r.head
	r.kick = make(chan struct{}, 1)
	r.done = make(chan struct{})
}

// add queues node n, just made, whose link is l; past the bound it
// wakes the clock.
func (r *reclaimer) add(n clockNode, l *clockLink) {
	r.mu.Lock()
	l.node = n
	if l.queued || r.stopped {
		r.mu.Unlock()
		return
	}
	r.pushFrontLocked(l)
	if r.max > 0 && r.n > r.max {
		if !r.started {
			r.started = true
			go r.run()
		}
		// Under mu: stop closes kick only after it set stopped under mu.
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
	r.mu.Unlock()
}

// remove unqueues a node the kernel forgot.
func (r *reclaimer) remove(l *clockLink) {
	r.mu.Lock()
	if l.queued {
		r.unlinkLocked(l)
	}
	r.mu.Unlock()
}

func (r *reclaimer) pushFrontLocked(l *clockLink) {
	l.prev, l.next = &r.head, r.head.next
	r.head.next.prev = l
	r.head.next = l
	l.queued = true
	r.n++
}

func (r *reclaimer) unlinkLocked(l *clockLink) {
	l.prev.next, l.next.prev = l.next, l.prev
	l.prev, l.next = nil, nil
	l.queued = false
	r.n--
}

// held returns how many nodes are queued.
func (r *reclaimer) held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// stop ends the clock's goroutine, if it runs. Calling it again does
// nothing.
func (r *reclaimer) stop() {
	r.mu.Lock()
	started, again := r.started, r.stopped
	r.stopped = true
	r.mu.Unlock()
	if started && !again {
		close(r.kick)
		<-r.done
	}
}

// droppedAfter: see unregistered.
const droppedAfter = time.Second

// run is the clock's goroutine: each kick, while more nodes than max are
// held, passes ask for the oldest unused ones. The kernel forgets them
// as it reads the notifications, and go-fuse's FORGET handling takes
// them out of the queue, so the count falls behind the asks: passes go
// on while they find nodes to ask for, up to twice the nodes held (the
// kernel may keep some: in use), then rest a second.
func (r *reclaimer) run() {
	defer close(r.done)
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		select {
		case _, ok := <-r.kick:
			if !ok {
				return
			}
		case <-retry.C:
		}
		r.gate.quiet(gateWait) // once a round: its passes take a moment
		for budget := 2 * r.held(); ; {
			held := r.held()
			if held <= r.max {
				break
			}
			asked := r.pass(held - r.max*9/10)
			budget -= asked
			if asked == 0 || budget <= 0 {
				retry.Reset(time.Second) // in use, or slow to go: look again later, not in a loop
				break
			}
		}
	}
}

// passBatch bounds the nodes asked for in one notification round, and
// the nodes looked at in one pass.
const passBatch = 1024

// pass asks the kernel to forget up to want of the oldest unused nodes.
// It moves the oldest nodes to the front of the queue (they stay queued
// until the kernel forgets them, OnForget) and then looks at them with
// no lock held: a node's own locks are not taken under reclaimer.mu.
func (r *reclaimer) pass(want int) (asked int) {
	r.mu.Lock()
	look := make([]*clockLink, 0, min(r.n, passBatch))
	for len(look) < cap(look) {
		l := r.head.prev
		r.unlinkLocked(l)
		r.pushFrontLocked(l)
		look = append(look, l)
	}
	r.mu.Unlock()
	now := time.Now().UnixNano()
	var batch []*clockLink
	for _, l := range look {
		if len(batch) >= want {
			break
		}
		if l.node.EmbeddedInode().Forgotten() {
			r.unregistered(l, now)
			continue
		}
		l.droppedAt.Store(0)
		if l.used.Swap(false) || l.node.clockBusy() {
			continue
		}
		batch = append(batch, l)
	}
	r.ask(batch)
	return len(batch)
}

// unregistered handles a node the kernel does not know: go-fuse took
// another node for its lookup, or has not registered it yet (for a
// moment after it is made). Found so twice droppedAfter apart, it is
// dropped from the clock.
func (r *reclaimer) unregistered(l *clockLink, now int64) {
	first := l.droppedAt.Load()
	switch {
	case first == 0:
		l.droppedAt.Store(now)
	case time.Duration(now-first) >= droppedAfter:
		r.remove(l)
		l.node.clockDropped()
	}
}

// ask sends the kernel the nodes of batch to forget.
func (r *reclaimer) ask(batch []*clockLink) {
	if len(batch) == 0 {
		return
	}
	first := r.asked.Add(int64(len(batch))) == int64(len(batch))
	if !r.noPrune.Load() {
		ins := make([]*gofs.Inode, len(batch))
		for i, l := range batch {
			ins[i] = l.node.EmbeddedInode()
		}
		errno := ins[0].NotifyPrune(ins)
		if errno != syscall.ENOSYS {
			if first {
				r.log.Info("more inodes held than --memory-limit allows: asking the kernel to forget the least recently used (FUSE_NOTIFY_PRUNE)", "held", r.held(), "bound", r.max, "errno", errno)
			}
			return
		}
		r.noPrune.Store(true)
	}
	if first {
		r.log.Info("more inodes held than --memory-limit allows: asking the kernel to forget the least recently used files (entry invalidations: this kernel has no FUSE_NOTIFY_PRUNE)", "held", r.held(), "bound", r.max)
	}
	for _, l := range batch {
		if l.node.clockDir() {
			continue
		}
		if name, parent := l.node.EmbeddedInode().Parent(); parent != nil {
			_ = parent.NotifyEntry(name) // the mount may be gone: nothing to do
		}
	}
}

// KernelNodes returns how many inodes the kernel holds (but the root),
// and how many the mount has asked it to forget since it started
// (reclaim.go).
func (f *FS) KernelNodes() (held int, asked int64) {
	return f.clock.held(), f.clock.asked.Load()
}
