package transfer

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// FetchReason says why a download fetched a chunk (DownloadOptions.OnFetched).
type FetchReason int

const (
	// FetchRead: a reader waits for the chunk.
	FetchRead FetchReason = iota
	// FetchReadahead: the chunk after what a reader reads in order,
	// fetched before it is asked for (Download.Readahead).
	FetchReadahead
	// FetchWhole: the background walk of a whole object (Start).
	FetchWhole
	// FetchWarm: a walk asked for by 'bucketfs warm' (StartFor).
	FetchWarm
	// NumFetchReasons is how many there are: counters indexed by reason
	// have this many.
	NumFetchReasons
)

func (r FetchReason) String() string {
	switch r {
	case FetchRead:
		return "read"
	case FetchReadahead:
		return "readahead"
	case FetchWhole:
		return "whole"
	case FetchWarm:
		return "warm"
	}
	return "unknown"
}

// yieldMax bounds one pause of a background fetch: a stream left unread
// for long may be cut by the server, and a mount that always has a
// reader waiting still moves its background work along (pauser).
const yieldMax = time.Second

// Priority puts the fetches readers wait for ahead of the others (the
// background walk, readahead, warm), over every download that shares it:
// while a reader waits, background fetches start no new request and stop
// reading the bodies of those in flight (they look every yieldGrain), so
// that flow control gives the link to the reader's request. A pause lasts
// at most maxPause, and a fetcher whose pause ran that long runs as long
// before it pauses again (pauser). A background fetch a reader comes to
// wait for is foreground from then on. A pause is not a stall: the stall
// watch runs only while a body read waits for the network.
//
// Priority.mu is a leaf: held only around its fields.
type Priority struct {
	maxPause time.Duration // one pause's bound (yieldMax)

	busy    atomic.Bool // waiting > 0: read without the lock by yield's fast path
	mu      sync.Mutex
	waiting int           // guarded by mu: readers waiting for bytes
	clear   chan struct{} // guarded by mu: closed when waiting falls to 0; nil while it is 0
}

// NewPriority returns a Priority with no reader waiting.
func NewPriority() *Priority { return &Priority{maxPause: yieldMax} }

// enter counts a reader that waits; the returned func ends its wait.
// A nil Priority counts nothing.
func (p *Priority) enter() func() {
	if p == nil {
		return func() {}
	}
	p.mu.Lock()
	if p.waiting == 0 {
		p.clear = make(chan struct{})
		p.busy.Store(true)
	}
	p.waiting++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.waiting--
		if p.waiting == 0 {
			close(p.clear)
			p.clear = nil
			p.busy.Store(false)
		}
		p.mu.Unlock()
	}
}

// yield returns when no reader waits, when wanted is closed (a reader
// came to wait for this very fetch), when ctx ends, or after maxPause;
// it reports whether the pause ran to its bound.
func (p *Priority) yield(ctx context.Context, wanted <-chan struct{}) (bounded bool) {
	if p == nil || !p.busy.Load() {
		return false
	}
	p.mu.Lock()
	clear := p.clear
	p.mu.Unlock()
	if clear == nil {
		return false
	}
	t := time.NewTimer(p.maxPause)
	defer t.Stop()
	select {
	case <-clear:
	case <-wanted:
	case <-ctx.Done():
	case <-t.C:
		return true
	}
	return false
}

// pauser is one background fetcher's side of a Priority. It pauses while
// readers wait, but after a pause that ran to its bound it runs as long
// again before it pauses anew: readers that never stop waiting (many at
// once, reading at random) leave background work half its time, and the
// link is not left idle when their own requests cannot fill it.
type pauser struct {
	p    *Priority
	free time.Time // no pause before this
}

// pause is yield, but not within the run that follows a bounded pause.
func (s *pauser) pause(ctx context.Context, wanted <-chan struct{}) {
	if s.p == nil || !s.p.busy.Load() || time.Now().Before(s.free) {
		return
	}
	if s.p.yield(ctx, wanted) {
		s.free = time.Now().Add(s.p.maxPause)
	}
}
