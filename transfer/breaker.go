package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// ErrOffline means the bucket is unreachable: the circuit breaker of the
// client (Breaker) is open, so the call was not sent, or it was cut short
// when the breaker opened. It is transient: the breaker probes the bucket
// and closes again when it answers.
var ErrOffline = errors.New("bucket unreachable (offline)")

// BreakerOptions configure the circuit breaker NewGCS puts on a client
// (GCSOptions.Breaker). Zero fields take the defaults.
type BreakerOptions struct {
	// Failures is how many HTTP requests in a row must fail (no
	// connection, a broken connection) before the bucket is probed (see
	// Stall) and, if the probe fails too, taken as offline, provided the
	// first of them is at least Span old (a burst
	// of parallel requests broken by one blip is no outage). Defaults: 3
	// and 1s. 5xx answers are counted apart: Failures of them in a row,
	// the first at least Stall old, make the breaker probe the bucket
	// (see Stall), since one object's trouble is no outage, and a bucket
	// that answers 503 now and then (GCS asks clients to retry those)
	// is online.
	Failures int
	Span     time.Duration
	// Stall is how long a request may make no progress (no answer, no
	// body bytes sent or read) before the bucket is suspected: if no
	// request succeeded meanwhile, one probe is sent at once, and if it
	// gets no answer within Stall either, the bucket is taken as offline
	// (a black hole: connections accepted, nothing answered). A slow
	// request of a bucket that answers the probe is left alone. Default
	// 3s: a black hole is detected within 2*Stall.
	Stall time.Duration
	// Probe is how often an offline bucket is asked (one cheap listing).
	// Default 2s.
	Probe  time.Duration
	Logger *slog.Logger
}

func (o *BreakerOptions) defaults() {
	if o.Failures <= 0 {
		o.Failures = 3
	}
	if o.Span <= 0 {
		o.Span = time.Second
	}
	if o.Stall <= 0 {
		o.Stall = 3 * time.Second
	}
	if o.Probe <= 0 {
		o.Probe = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Breaker is the circuit breaker of a bucket client. Contract:
//   - It sees every HTTP request the client sends (retries of the storage
//     library included), as an http.RoundTripper in the client's chain,
//     so an unreachable bucket is detected within seconds, not after the
//     library's own retries: connections refused, broken or timing out
//     (BreakerOptions.Failures in a row over Span), or as many 5xx
//     answers in a row over Stall, or a request with no progress for
//     BreakerOptions.Stall while nothing else succeeded (a black-holed
//     bucket); each confirmed by a probe that gets no good answer
//     within Stall either (at once when connections are refused). The
//     credentials' token requests are not the bucket's: the client's
//     token transport is outside the breaker, and a probe that got no
//     token (ErrNoToken) confirms nothing.
//   - Once open ("offline"), every request fails at once with an error
//     matching ErrOffline, which the client does not retry; requests in
//     flight then are cancelled and fail the same way.
//   - While open, a background probe sends one cheap request every
//     BreakerOptions.Probe; the first request that gets an answer (any
//     status below 500) closes it. The probe stops at Close.
//   - Each change of state is logged once: WARN when going offline, with
//     the cause; INFO when online again, with the outage's length.
type Breaker struct {
	o     BreakerOptions
	probe func(ctx context.Context) error // set once before start

	mu       sync.Mutex
	open     bool
	since    time.Time // of the last change of state (zero: never changed)
	cause    string    // why it opened, while open
	fails    int       // requests failed in a row
	first    time.Time // first of them
	fails5xx int       // 5xx answers in a row (no good answer between)
	first5xx time.Time // first of them
	lastOK   time.Time
	attempts map[*request]struct{} // requests in flight
	online   chan struct{}         // closed while online; replaced when it opens
	offline  chan struct{}         // closed while offline; replaced when it closes
	checking bool                  // a probe of a suspected stall runs

	stop chan struct{}
	wg   sync.WaitGroup
}

func newBreaker(o BreakerOptions) *Breaker {
	o.defaults()
	on := make(chan struct{})
	close(on)
	return &Breaker{o: o, attempts: map[*request]struct{}{}, online: on, offline: make(chan struct{}),
		lastOK: time.Now(), stop: make(chan struct{})}
}

// BreakerState is a snapshot of a Breaker.
type BreakerState struct {
	Online bool
	Since  time.Time // when it last changed; zero if it never did
	Cause  string    // why it is offline
}

// State returns the breaker's state now.
func (b *Breaker) State() BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BreakerState{Online: !b.open, Since: b.since, Cause: b.cause}
}

// Online returns a channel that is closed while the bucket is online: a
// caller that must not send while it is offline waits on it.
func (b *Breaker) Online() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.online
}

// Offline returns a channel that is closed while the bucket is offline: a
// caller that waits for the bucket stops waiting on it when it goes away
// (the flush at unmount).
func (b *Breaker) Offline() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.offline
}

// ProbeNow sends one probe now, as the background probe does, bounded by
// ctx and Stall (plus a second), and returns its error: nil if the bucket
// answered, which closes the breaker. Its outcome is recorded as any
// request's. Not before the client is made (the probe is set then).
func (b *Breaker) ProbeNow(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, probeKey{}, true), b.o.Stall+time.Second)
	defer cancel()
	return b.probe(ctx)
}

// ForceOffline opens the breaker as if the bucket had failed, with cause
// (an offline start: the start-up check could not reach it), without
// logging it: the caller says it. The probe
// closes it when the bucket answers.
func (b *Breaker) ForceOffline(cause error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.openLocked(time.Now(), cause, true)
}

// start runs the probe until Close.
func (b *Breaker) start(probe func(ctx context.Context) error) {
	b.probe = probe
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(b.o.Probe)
		defer t.Stop()
		for {
			select {
			case <-b.stop:
				return
			case <-t.C:
			}
			if b.State().Online {
				continue
			}
			ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), probeKey{}, true), b.o.Stall+time.Second)
			go func() { // Close cuts a probe short
				select {
				case <-b.stop:
					cancel()
				case <-ctx.Done():
				}
			}()
			_ = b.probe(ctx) // its request's outcome is recorded by the transport
			cancel()
		}
	}()
}

// Close stops the probe and waits for it.
func (b *Breaker) Close() {
	b.mu.Lock() // suspect adds to wg under it, only while stop is open
	select {
	case <-b.stop:
	default:
		close(b.stop)
	}
	b.mu.Unlock()
	b.wg.Wait()
}

type probeKey struct{}

// checkKey marks the probe of a suspected stall: sent while online, it
// must not itself be taken for another stalled request.
type checkKey struct{}

type quietKey struct{}

// QuietOffline returns a ctx under which a request that makes the breaker
// open does not log it: the caller reports the outage itself (the
// start-up check, which either starts offline or fails, in one line).
func QuietOffline(ctx context.Context) context.Context {
	return context.WithValue(ctx, quietKey{}, true)
}

func isQuiet(ctx context.Context) bool { v, _ := ctx.Value(quietKey{}).(bool); return v }

func isProbe(ctx context.Context) bool { v, _ := ctx.Value(probeKey{}).(bool); return v }

// offlineError is ErrOffline with what made the bucket offline.
type offlineError struct{ cause string }

func (e *offlineError) Error() string {
	if e.cause == "" {
		return ErrOffline.Error()
	}
	return fmt.Sprintf("%v: %s", ErrOffline, e.cause)
}

func (e *offlineError) Is(target error) bool { return target == ErrOffline }

func (b *Breaker) offlineErrLocked() error { return &offlineError{cause: b.cause} }

// openLocked takes the bucket as offline and cancels the requests in
// flight. b.mu is held.
func (b *Breaker) openLocked(now time.Time, cause error, quiet bool) {
	if b.open {
		return
	}
	b.open, b.since, b.cause = true, now, cause.Error()
	b.online = make(chan struct{})
	close(b.offline)
	if !quiet {
		b.logOffline()
	}
	for a := range b.attempts {
		a.cutOffline()
	}
}

func (b *Breaker) logOffline() {
	b.o.Logger.Warn("the bucket is unreachable: working offline (cached files are served, changes are queued, other reads fail with EIO); probing it every "+b.o.Probe.String(),
		"cause", b.cause)
}

// succeeded records an answer of the bucket.
func (b *Breaker) succeeded() {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fails, b.fails5xx, b.lastOK = 0, 0, now
	if !b.open {
		return
	}
	outage := now.Sub(b.since)
	b.open, b.since, b.cause = false, now, ""
	close(b.online)
	b.offline = make(chan struct{})
	b.o.Logger.Info("the bucket answers again: back online; queued changes are being uploaded", "offline_for", outage.Round(time.Second))
}

// failed records a failed request and reports whether the bucket is
// offline now (then the error the request returns is ErrOffline).
func (b *Breaker) failed(cause error, quiet bool) bool {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open {
		return true
	}
	if b.fails == 0 {
		b.first = now
	}
	b.fails++
	if b.fails >= b.o.Failures && now.Sub(b.first) >= b.o.Span {
		// A probe confirms it (at once if connections are refused): a
		// bucket that answers it was only breaking some connections.
		b.suspectLocked(b.first, quiet, fmt.Sprintf("%d requests failed in a row over %v, the last: %v", b.fails, now.Sub(b.first).Round(time.Millisecond), cause))
	}
	return b.open
}

// answered5xx records a 5xx answer (not of a probe) and, once
// BreakerOptions.Failures of them came in a row over at least Stall,
// suspects the bucket.
func (b *Breaker) answered5xx(quiet bool) {
	now := time.Now()
	b.mu.Lock()
	if b.fails5xx == 0 {
		b.first5xx = now
	}
	b.fails5xx++
	first, n, due := b.first5xx, b.fails5xx, b.fails5xx >= b.o.Failures && now.Sub(b.first5xx) >= b.o.Stall
	b.mu.Unlock()
	if due {
		b.suspect(first, quiet, fmt.Sprintf("%d answers in a row were 5xx", n))
	}
}

// suspect is told that a request made no progress since since (for
// Stall), or of a run of failures or 5xx answers that began then (why
// says which). If nothing succeeded since then and no check runs, it
// sends one probe; if that gets no good answer within
// Stall, the bucket is offline (which cuts the stalled request too).
func (b *Breaker) suspect(since time.Time, quiet bool, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.suspectLocked(since, quiet, why)
}

// suspectLocked is suspect with b.mu held.
func (b *Breaker) suspectLocked(since time.Time, quiet bool, why string) {
	if b.open || b.checking || b.lastOK.After(since) {
		return
	}
	select {
	case <-b.stop:
		return
	default:
	}
	b.checking = true
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), checkKey{}, true), b.o.Stall)
		defer cancel()
		go func() { // Close cuts the check short
			select {
			case <-b.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		err := b.probe(ctx)
		b.mu.Lock()
		defer b.mu.Unlock()
		b.checking = false
		// A probe that got no token was not sent: it says nothing of
		// the bucket (credentials.go).
		if err != nil && !errors.Is(err, ErrNoToken) && !b.lastOK.After(start) && ctx.Err() != context.Canceled {
			b.openLocked(time.Now(), fmt.Errorf("%s, and a probe got no good answer: %w", why, err), quiet)
		}
	}()
}

// admit registers a request about to be sent, or refuses it with
// ErrOffline.
func (b *Breaker) admit(a *request, probe bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open && !probe {
		return b.offlineErrLocked()
	}
	b.attempts[a] = struct{}{}
	return nil
}

func (b *Breaker) done(a *request) {
	b.mu.Lock()
	delete(b.attempts, a)
	b.mu.Unlock()
}

// offlineErr is the error of a request that failed while offline.
func (b *Breaker) offlineErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.offlineErrLocked()
}

// Transport returns base wrapped so that every request goes through b.
func (b *Breaker) Transport(base http.RoundTripper) http.RoundTripper {
	return &breakerTransport{b: b, base: base}
}

type breakerTransport struct {
	b    *Breaker
	base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *breakerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	parent := req.Context()
	probe := isProbe(parent)
	ctx, cancel := context.WithCancel(parent)
	a := &request{b: t.b, cancel: cancel, sending: true, quiet: isQuiet(parent), check: parent.Value(checkKey{}) != nil}
	if err := t.b.admit(a, probe); err != nil {
		cancel()
		closeBody(req)
		return nil, err
	}
	a.timer = time.AfterFunc(t.b.o.Stall, a.fire)
	a.watch()
	req = req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = &sendBody{r: req.Body, a: a}
	}
	resp, err := t.base.RoundTrip(req)
	a.answered()
	if err != nil {
		return nil, a.finish(parent, err, probe)
	}
	switch {
	case resp.StatusCode >= 500 && probe:
		resp.Body.Close()
		a.end()
		return nil, t.b.offlineErr()
	case resp.StatusCode >= 500:
		// The bucket answered: a 5xx may be of this request alone (one
		// object's trouble, retried by the library) or a passing one. A
		// run of them makes a probe tell: if it gets no good answer
		// either, the bucket is offline.
		if !a.check {
			t.b.answered5xx(a.quiet)
		}
	default:
		t.b.succeeded()
	}
	resp.Body = &recvBody{r: resp.Body, a: a, parent: parent}
	return resp, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// request is one HTTP request in flight: its progress watch (the stall
// timer runs while the request waits on the network, not while the
// caller produces or consumes its bytes) and how it was cut short.
type request struct {
	b      *Breaker
	cancel context.CancelFunc
	quiet  bool // its outage is not logged (QuietOffline)
	check  bool // the probe of a suspected stall
	timer  *time.Timer

	mu       sync.Mutex
	deadline time.Time // of the watch running; zero: none
	sending  bool      // the answer has not come yet
	offline  bool      // cut because the breaker opened
	ended    bool
}

// watch starts (or restarts) the stall timer.
func (a *request) watch() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ended {
		return
	}
	a.deadline = time.Now().Add(a.b.o.Stall)
	a.timer.Reset(a.b.o.Stall)
}

// unwatch pauses it.
func (a *request) unwatch() {
	a.mu.Lock()
	a.deadline = time.Time{}
	a.mu.Unlock()
}

// fire is the stall timer's function: if the request's watch is running
// and overdue (a timer reset late may fire early), the bucket is
// suspected, and the watch starts again.
func (a *request) fire() {
	a.mu.Lock()
	switch {
	case a.ended || a.deadline.IsZero():
		a.mu.Unlock()
		return
	case time.Now().Before(a.deadline):
		a.timer.Reset(time.Until(a.deadline))
		a.mu.Unlock()
		return
	}
	since := a.deadline.Add(-a.b.o.Stall)
	a.deadline = time.Now().Add(a.b.o.Stall)
	a.timer.Reset(a.b.o.Stall)
	a.mu.Unlock()
	if !a.check {
		a.b.suspect(since, a.quiet, fmt.Sprintf("a request made no progress for %v", a.b.o.Stall))
	}
}

func (a *request) cutOffline() {
	a.mu.Lock()
	a.offline = true
	a.mu.Unlock()
	a.cancel()
}

// answered marks the end of the sending phase: from now on the timer
// runs only while the caller waits for body bytes.
func (a *request) answered() {
	a.mu.Lock()
	a.sending = false
	a.deadline = time.Time{}
	a.mu.Unlock()
}

// end releases the attempt.
func (a *request) end() {
	a.mu.Lock()
	a.ended = true
	a.mu.Unlock()
	a.timer.Stop()
	a.cancel()
	a.b.done(a)
}

// finish ends a request that failed with err and returns the error its
// caller sees: ErrOffline if the breaker is (or now goes) offline; the
// caller's own cancellation as it is.
func (a *request) finish(parent context.Context, err error, probe bool) error {
	a.mu.Lock()
	offline := a.offline
	a.mu.Unlock()
	defer a.end()
	switch {
	case offline:
		return a.b.offlineErr()
	case parent.Err() != nil:
		return err // the caller gave up (or a check's deadline): says nothing of the bucket
	}
	if a.b.failed(err, isQuiet(parent)) || probe {
		return a.b.offlineErr()
	}
	return err
}

// sendBody is a request body: the transport reading it means progress.
type sendBody struct {
	r io.ReadCloser
	a *request
}

func (s *sendBody) Read(p []byte) (int, error) {
	s.a.unwatch() // the time the body's producer takes is not the network's
	n, err := s.r.Read(p)
	s.a.mu.Lock()
	again := s.a.sending
	s.a.mu.Unlock()
	if again {
		s.a.watch()
	}
	return n, err
}

func (s *sendBody) Close() error { return s.r.Close() }

// recvBody is a response body: the stall timer runs while a Read waits.
type recvBody struct {
	r      io.ReadCloser
	a      *request
	parent context.Context
	err    error // the first read error, as the caller saw it
	once   sync.Once
}

func (r *recvBody) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	r.a.watch()
	n, err := r.r.Read(p)
	r.a.unwatch()
	if err != nil && err != io.EOF {
		r.once.Do(func() { err = r.a.finish(r.parent, err, false) })
		r.err = err
	}
	return n, err
}

func (r *recvBody) Close() error {
	err := r.r.Close()
	r.once.Do(r.a.end)
	return err
}
