package transfer

// Stalled streams: a range read whose body stops arriving, or an upload
// whose body the server stops taking, would otherwise be waited out for
// as long as the server keeps the connection (a 20 s stall mid-body made
// a 20 MiB read take 37.7 s). A watch cancels such a request once it has
// made no progress for GCSOptions.StallTimeout; a read is then taken up
// where it stopped by a new request, an upload fails (ErrStalled) and
// the cache's uploader sends it again later. Cancelling the request
// closes its HTTP/1.1 connection (an HTTP/2 stream is reset), so the new
// request does not wait behind the stalled one.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultStallTimeout is how long a transfer may go without progress
// before it is cancelled. A healthy stream moves a 32 KiB read buffer in
// well under a second even at 1 Mbit/s, and GCS answers the first byte of
// a read in tens to hundreds of milliseconds; the storage client's own
// backoff between tries of a failed request reaches 5 s (NewGCS). Twice
// that leaves a slow but live connection alone and still ends a stall
// long before a 20 s one would end by itself.
const DefaultStallTimeout = 10 * time.Second

// maxStallRetries bounds the new requests one range read makes after
// stalls: a server that stalls every stream is down, not slow.
const maxStallRetries = 3

// ErrStalled: a transfer made no progress for the stall timeout and was
// cancelled.
var ErrStalled = errors.New("the transfer made no progress and was cancelled")

// StallObserver is an optional interface of an Observer (see Metered): it
// is told of every transfer cancelled because it stalled; dir is "read"
// or "upload".
type StallObserver interface {
	Stalled(dir string)
}

// answerWaits is how many stall timeouts a request whose body is all
// sent waits for its answer: what follows the body is the server's work
// (a large object made whole), not a stream, but a server that never
// answers must not hold the upload for ever (one that stopped reading
// after the client's socket buffers took the rest of the body looks
// just so to the client).
const answerWaits = 6

// stallWatch cancels the context of one request once it has made no
// progress for timeout. progress is called for every bit of the body that
// moves; once the body is all sent (paused), the watch waits answerWaits
// times as long for the answer.
type stallWatch struct {
	timeout time.Duration
	cancel  context.CancelFunc
	last    atomic.Int64 // time.Now().UnixNano() of the last progress
	paused  atomic.Bool
	stalled atomic.Bool
	done    chan struct{}
	once    sync.Once      // stop's
	wg      sync.WaitGroup // the watching goroutine
}

// watchStalls starts a watch of a request made with the returned ctx;
// stop must be called when the request ends. timeout <= 0 watches
// nothing.
func watchStalls(ctx context.Context, timeout time.Duration) (context.Context, *stallWatch) {
	ctx, cancel := context.WithCancel(ctx)
	w := &stallWatch{timeout: timeout, cancel: cancel, done: make(chan struct{})}
	w.last.Store(time.Now().UnixNano())
	if timeout <= 0 {
		return ctx, w
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(max(timeout/8, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				idle := now.Sub(time.Unix(0, w.last.Load()))
				limit := timeout
				if w.paused.Load() {
					limit = timeout * answerWaits
				}
				if idle >= limit {
					w.stalled.Store(true)
					cancel()
					return
				}
			}
		}
	}()
	return ctx, w
}

func (w *stallWatch) progress() { w.last.Store(time.Now().UnixNano()) }

// stop ends the watch and reports whether it cancelled the request; it
// may be called more than once.
func (w *stallWatch) stop() bool {
	w.once.Do(func() {
		close(w.done)
		w.wg.Wait()
		w.cancel()
	})
	return w.stalled.Load()
}

// noteStall tells the Observer of the metered call ctx belongs to (if
// any, and if it counts stalls) that a transfer stalled.
func noteStall(ctx context.Context, dir string) {
	if c, ok := ctx.Value(callKey{}).(*call); ok {
		if so, ok := c.o.(StallObserver); ok {
			so.Stalled(dir)
		}
	}
}

// stallWriter marks progress for every write of a read's body.
type stallWriter struct {
	w     io.Writer
	watch *stallWatch
}

func (s stallWriter) Write(p []byte) (int, error) {
	s.watch.progress()
	n, err := s.w.Write(p)
	s.watch.progress() // the time the caller's writer took is not the stream's
	return n, err
}

// stallReader marks progress for every read of an upload's body, and
// pauses the watch once the body is all read.
type stallReader struct {
	r     io.Reader
	watch *stallWatch
}

func (s stallReader) Read(p []byte) (int, error) {
	s.watch.progress()
	n, err := s.r.Read(p)
	if err == io.EOF {
		s.watch.paused.Store(true)
	}
	return n, err
}

// readRangeOnce is one request of a range read (gcs.go).
type readRangeOnce func(ctx context.Context, off, length int64, w io.Writer) (int64, error)

// readUnstalled runs a range read of length bytes at off (length < 0: to
// the end) with once, watched for stalls: a request that stalls is
// cancelled and the rest of the range read by a new one, at most
// maxStallRetries times. The bytes already written to w stay.
func readUnstalled(ctx context.Context, timeout time.Duration, what string, off, length int64, w io.Writer, once readRangeOnce) (int64, error) {
	var total int64
	for try := 0; ; try++ {
		rest := length
		if length >= 0 {
			rest = length - total
		}
		rctx, watch := watchStalls(ctx, timeout)
		n, err := once(rctx, off+total, rest, stallWriter{w, watch})
		stalled := watch.stop()
		total += n
		if !stalled || ctx.Err() != nil {
			return total, err
		}
		noteStall(ctx, "read")
		if try >= maxStallRetries {
			return total, fmt.Errorf("%s at offset %d: no progress for %v, %d times: %w", what, off+total, timeout, try+1, ErrStalled)
		}
		if length >= 0 && total >= length {
			return total, nil // it stalled after its last byte
		}
	}
}
