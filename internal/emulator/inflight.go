package emulator

import (
	"sync"
	"time"
)

// handlers counts the requests being handled, for Close to wait for. A
// sync.WaitGroup cannot do it: a connection accepted just before Close
// may start its handler (Add) while Close already waits, which the
// WaitGroup forbids. Here a handler that starts after Close began is
// refused instead (enter returns false), and its request fails.
type handlers struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{} // closed when n drops to 0; nil while n is 0
}

// enter counts one more handler, unless Close began.
func (h *handlers) enter() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	if h.n == 0 {
		h.idle = make(chan struct{})
	}
	h.n++
	return true
}

// exit ends a handler that entered.
func (h *handlers) exit() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n--
	if h.n == 0 {
		close(h.idle)
		h.idle = nil
	}
}

// wait waits until no handler runs, or for at most d; it reports whether
// none runs. With closing, no handler may start afterwards.
func (h *handlers) wait(d time.Duration, closing bool) bool {
	h.mu.Lock()
	h.closed = h.closed || closing
	idle := h.idle
	h.mu.Unlock()
	if idle == nil {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}
