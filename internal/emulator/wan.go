package emulator

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"golang.org/x/time/rate"
)

// maxBurst caps the burst of every limiter, and so the size of the slices
// in which bodies are written and read.
const maxBurst = 256 << 10

// WANProfile describes the network the emulator pretends to be behind.
type WANProfile struct {
	// Latency is added before each response starts (before its headers).
	Latency time.Duration
	// PerConn limits, in bytes/s, each direction of each TCP connection
	// the emulator accepts (connshape.go), whatever the requests on it;
	// behind Shape, each request body and each response body. 0 means
	// unlimited.
	PerConn int64
	// Total limits, in bytes/s, all of them together. 0 means unlimited.
	Total int64
}

// DefaultWAN is the profile the demo and the benchmark use: 30ms before
// each response, 25 MiB/s per TCP connection (each way), 200 MiB/s in
// total.
func DefaultWAN() WANProfile {
	return WANProfile{
		Latency: 30 * time.Millisecond,
		PerConn: 25 << 20,
		Total:   200 << 20,
	}
}

// shaper applies one WANProfile. The Total limiter lives here, shared by
// every request shaped by this shaper.
type shaper struct {
	profile WANProfile
	total   *rate.Limiter // nil: unlimited
}

// newShaper builds a shaper for p.
func newShaper(p WANProfile) *shaper {
	return &shaper{profile: p, total: newLimiter(p.Total)}
}

// newLimiter returns a limiter of bytesPerSec, or nil for 0 (unlimited).
// Its burst is an eighth of a second of traffic, at most maxBurst: enough to
// move data in reasonable slices, small enough that the first burst does not
// distort short transfers much.
func newLimiter(bytesPerSec int64) *rate.Limiter {
	if bytesPerSec <= 0 {
		return nil
	}
	burst := int(min(bytesPerSec/8, maxBurst))
	return rate.NewLimiter(rate.Limit(bytesPerSec), max(burst, 1))
}

// pacer charges byte counts to a set of limiters (a per-request one and the
// shared total), giving up when its context ends.
type pacer struct {
	ctx      context.Context
	limiters []*rate.Limiter
	chunk    int // largest n that wait accepts: the smallest burst
}

// newPacer returns a pacer over the non-nil limiters, or nil if there are
// none (no pacing needed).
func newPacer(ctx context.Context, limiters ...*rate.Limiter) *pacer {
	p := &pacer{ctx: ctx, chunk: maxBurst}
	for _, l := range limiters {
		if l != nil {
			p.limiters = append(p.limiters, l)
			p.chunk = min(p.chunk, l.Burst())
		}
	}
	if len(p.limiters) == 0 {
		return nil
	}
	return p
}

// errTooLarge should not happen: callers slice to p.chunk.
var errTooLarge = errors.New("emulator: pacing request larger than limiter burst")

// wait blocks until n bytes (n <= p.chunk) may pass all limiters, or the
// context ends. It reserves on all limiters at once and sleeps for the
// longest delay, rather than calling WaitN on each in turn, so that two
// binding limiters cost max(delays), not their sum. On cancellation the
// reservations are returned, as WaitN would do.
func (p *pacer) wait(n int) error {
	if err := p.ctx.Err(); err != nil {
		return err
	}
	now := time.Now()
	res := make([]*rate.Reservation, 0, len(p.limiters))
	cancelAll := func() {
		for _, r := range res {
			r.Cancel()
		}
	}
	var delay time.Duration
	for _, l := range p.limiters {
		r := l.ReserveN(now, n)
		if !r.OK() {
			cancelAll()
			return errTooLarge
		}
		res = append(res, r)
		delay = max(delay, r.DelayFrom(now))
	}
	if delay <= 0 {
		return nil
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-p.ctx.Done():
		cancelAll()
		return p.ctx.Err()
	}
}

// sleepCtx sleeps for d or until ctx ends, and reports whether it slept
// the whole time.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Shape returns h behind the WAN profile p, for servers other than the
// emulator (a reverse proxy in front of an S3-compatible server, say): each
// request waits p.Latency before h sees it, and its request and response
// bodies are paced to p.PerConn each and to p.Total together with every
// other request through the returned handler. A zero profile neither
// delays nor paces.
func Shape(h http.Handler, p WANProfile) http.Handler {
	sh := newShaper(p)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sh.serve(w, r, h)
	})
}

// wanMiddleware delays each response by the current profile's latency
// (see SetWAN); the emulator's listeners pace the bytes, per connection
// (connshape.go).
func (s *Server) wanMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sh := s.shaper.Load(); sh != nil && !sleepCtx(r.Context(), sh.profile.Latency) {
			return // client gone or server closing
		}
		next.ServeHTTP(w, r)
	})
}

// serve passes r on to next under the profile: latency first, then pacing
// of the request body and the response body.
func (sh *shaper) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	ctx := r.Context()
	if !sleepCtx(ctx, sh.profile.Latency) {
		return // client gone or server closing
	}
	if r.Body != nil && r.Body != http.NoBody {
		if p := newPacer(ctx, newLimiter(sh.profile.PerConn), sh.total); p != nil {
			r.Body = &pacedBody{ReadCloser: r.Body, p: p}
		}
	}
	if p := newPacer(ctx, newLimiter(sh.profile.PerConn), sh.total); p != nil {
		pw := &pacedWriter{ResponseWriter: w, p: p}
		pw.flusher, _ = w.(http.Flusher)
		w = pw
	}
	next.ServeHTTP(w, r)
}

// pacedWriter paces the body written through it, flushing each slice so the
// client sees bytes as they are released.
type pacedWriter struct {
	http.ResponseWriter
	p       *pacer
	flusher http.Flusher // nil if the underlying writer cannot flush
}

// Write writes b in slices of at most the pacer's chunk, waiting for tokens
// before each. It stops with the context's error if the request ends.
func (w *pacedWriter) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		n := min(len(b), w.p.chunk)
		if err := w.p.wait(n); err != nil {
			return written, err
		}
		m, err := w.ResponseWriter.Write(b[:n])
		written += m
		if err != nil {
			return written, err
		}
		if w.flusher != nil {
			w.flusher.Flush()
		}
		b = b[n:]
	}
	return written, nil
}

// Flush implements http.Flusher.
func (w *pacedWriter) Flush() {
	if w.flusher != nil {
		w.flusher.Flush()
	}
}

// Unwrap returns the underlying writer, for http.ResponseController.
func (w *pacedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// pacedBody paces a request body: each Read returns at most the pacer's
// chunk and then waits for tokens for what it read.
type pacedBody struct {
	io.ReadCloser
	p *pacer
}

// Read implements io.Reader.
func (b *pacedBody) Read(buf []byte) (int, error) {
	if len(buf) > b.p.chunk {
		buf = buf[:b.p.chunk]
	}
	n, err := b.ReadCloser.Read(buf)
	if n > 0 {
		if werr := b.p.wait(n); werr != nil {
			return n, werr
		}
	}
	return n, err
}
