package emulator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2/pstest"
	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/google/btree"
	"google.golang.org/api/option"
)

// ErrBucketNotFound is returned by the direct (non-HTTP) helpers when the
// named bucket does not exist.
var ErrBucketNotFound = errors.New("emulator: bucket not found")

// ErrObjectNotFound is returned by the direct (non-HTTP) helpers when the
// named object does not exist.
var ErrObjectNotFound = errors.New("emulator: object not found")

// closeWait bounds how long Close waits for in-flight handlers to return
// after their contexts have been cancelled.
const closeWait = 5 * time.Second

// Options configures Start.
type Options struct {
	// Addr is the listen address; "" means "127.0.0.1:0" (a free loopback
	// port).
	Addr string
	// Buckets are created, empty, at start.
	Buckets []string
	// WAN, if not nil, shapes all traffic with this profile. nil means no
	// shaping. See also Server.SetWAN.
	WAN *WANProfile
	// TLS also serves the emulator over HTTPS on a second listener (see
	// TLSURL and CertPEM), with a self-signed certificate made at start
	// and ALPN offering h2 and http/1.1, as GCS does.
	TLS bool
	// TLSAddr is the TLS listener's address; "" means "127.0.0.1:0".
	TLSAddr string
	// Tokens, if not nil, makes the emulator check credentials as GCS
	// does (auth.go): every request needs "Authorization: Bearer T"
	// with a T that Tokens takes as valid, or is answered 401.
	Tokens TokenChecker
	// Seeded serves Buckets from the seeded store (seeded.go) from the
	// start, as if PutMany had seeded them, and makes Put store objects
	// there too (but for a name the fake holds, or in a bucket that
	// keeps versions). It runs a test written for the fake against the
	// seeded store.
	Seeded bool
	// PubSub starts a Pub/Sub fake (pstest) on a gRPC listener of its
	// own (PubSubAddr), to which the emulator publishes object change
	// notifications for the buckets with notification configurations,
	// as GCS does (notifyconfig.go). A non-empty PubSubAddr implies it.
	PubSub bool
	// PubSubAddr is the Pub/Sub fake's listen address; "" means
	// "127.0.0.1:0".
	PubSubAddr string
}

// Server is a running emulator. All methods are safe for concurrent use.
type Server struct {
	fake     *fakestorage.Server
	listener net.Listener
	http     *http.Server
	url      string

	// baseCancel cancels the base context of every request, so that
	// shaping waits and hooks end promptly on Close.
	baseCancel context.CancelFunc
	serveDone  chan struct{}
	inflight   handlers

	// The TLS listener (tls.go); tlsHTTP is nil without Options.TLS.
	tlsHTTP *http.Server
	tlsDone chan struct{}
	tlsURL  string
	certPEM []byte

	plainAccepted atomic.Int64 // TCP connections accepted (connshape.go)
	tlsAccepted   atomic.Int64
	closeOnce     sync.Once
	patchMu       sync.RWMutex // a PATCH or a folder rename runs alone (patchMiddleware, folder.go)

	tokens       TokenChecker // Options.Tokens; nil: no check
	unauthorized atomic.Int64 // requests answered 401 by the check

	requests   atomic.Int64
	mediaTotal atomic.Int64
	mediaMu    sync.Mutex
	media      map[objectKey]*atomic.Int64

	faultMu sync.RWMutex
	faults  map[string]int

	hook   atomic.Pointer[hookFunc]
	after  atomic.Pointer[func(*http.Request)]
	stall  atomic.Pointer[bodyStall]  // stall.go
	answer atomic.Pointer[answerFunc] // lostanswer.go
	// uploads are the resumable upload sessions (resumable.go).
	uploads sessions
	shaper  atomic.Pointer[shaper]

	// arrived, if set, is called when a request arrives (a test seam).
	arrived atomic.Pointer[func(*http.Request)]

	// putMu serialises Put and PutMany so that generations chosen by
	// them are unique. Lock order: putMu before seedMu (seeded.go).
	putMu   sync.Mutex
	lastGen int64 // guarded by putMu

	// seedMu guards seeded, the objects PutMany stored (seeded.go): a
	// B-tree per bucket, ordered by name. Lock order: seedMu before
	// patchMu.
	seedMu sync.RWMutex
	seeded map[string]*seedTree // guarded by seedMu
	// seedPuts makes Put store in the seeded store (Options.Seeded).
	seedPuts bool
	// publicHost is the listener's host:port, the Host of the XML
	// requests the fake routes to its download handler.
	publicHost string

	// guardMu serialises the calls whose preconditions the emulator checks
	// itself (see preconditionMiddleware), and folder renames. Lock order:
	// guardMu before patchMu.
	guardMu sync.Mutex

	// Hierarchical namespace (folder.go).
	hnsMu         sync.Mutex
	hns           map[string]bool            // buckets with one
	kept          map[string]map[string]bool // bucket -> folders that stay with no object under them
	opsMu         sync.Mutex
	ops           map[string]folderOp
	opSeq         atomic.Int64
	folderRenames atomic.Int64

	// The Pub/Sub fake (pubsub.go; nil without Options.PubSub) and the
	// notifications published to it (notifyconfig.go, notifywatch.go,
	// notifypublish.go). publishCancel stops the publisher, which
	// closes publishDone.
	ps            *pstest.Server
	notify        notifier
	publishCancel context.CancelFunc
	publishDone   chan struct{}
}

// hookFunc is the type stored by SetHook.
type hookFunc func(r *http.Request) (status int, handled bool)

// objectKey identifies an object in the per-object counters.
type objectKey struct{ bucket, name string }

// Start listens on opts.Addr, creates the fake with matching host and port,
// creates opts.Buckets and serves until Close.
func Start(opts Options) (*Server, error) {
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("emulator: listen %s: %w", addr, err)
	}
	host, portStr, err := net.SplitHostPort(l.Addr().String())
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("emulator: listener address: %w", err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("emulator: listener port %q: %w", portStr, err)
	}
	// A wildcard listener is reachable through loopback; clients need a
	// concrete host in the URL, and the fake matches it against Host.
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	hostPort := net.JoinHostPort(host, portStr)
	url := "http://" + hostPort

	fake, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		NoListener: true,
		Scheme:     "http",
		Host:       host,
		Port:       uint16(port),
		// The XML API ("/BUCKET/OBJECT") is routed only for requests whose
		// Host equals the public host, so make that our listener.
		PublicHost:  hostPort,
		ExternalURL: url,
	})
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("emulator: start fake: %w", err)
	}

	baseCtx, baseCancel := context.WithCancel(context.Background())
	s := &Server{
		fake:       fake,
		listener:   l,
		url:        url,
		baseCancel: baseCancel,
		serveDone:  make(chan struct{}),
		media:      make(map[objectKey]*atomic.Int64),
		seeded:     make(map[string]*seedTree),
		publicHost: hostPort,
		faults:     make(map[string]int),
		hns:        make(map[string]bool),
		kept:       make(map[string]map[string]bool),
		ops:        make(map[string]folderOp),
		tokens:     opts.Tokens,
		seedPuts:   opts.Seeded,
	}
	s.notify.configs = make(map[string][]NotificationConfig)
	s.notify.wake = make(chan struct{}, 1)
	s.publishDone = make(chan struct{})
	if opts.PubSub || opts.PubSubAddr != "" {
		if s.ps, err = startPubSub(opts.PubSubAddr); err != nil {
			baseCancel()
			l.Close()
			fake.Stop()
			return nil, err
		}
		var pubCtx context.Context
		pubCtx, s.publishCancel = context.WithCancel(context.Background())
		go s.publishLoop(pubCtx, s.publishDone)
	} else {
		close(s.publishDone)
	}
	if opts.WAN != nil {
		s.SetWAN(opts.WAN)
	}
	for _, b := range opts.Buckets {
		s.CreateBucket(b)
		if opts.Seeded {
			s.seeded[b] = btree.NewG(seedDegree, seedLess)
		}
	}

	s.http = &http.Server{
		Handler:           s.countMiddleware(s.wanMiddleware(s.authMiddleware(s.faultMiddleware(s.seedMiddleware(s.nameLimitMiddleware(s.resumableMiddleware(s.notifyMiddleware(s.folderMiddleware(s.preconditionMiddleware(s.composeMiddleware(s.patchMiddleware(fake.HTTPHandler())))))))))))),
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}
	s.tlsDone = make(chan struct{})
	if opts.TLS {
		if err := s.startTLS(baseCtx, opts.TLSAddr, s.http.Handler, s.http); err != nil {
			baseCancel()
			l.Close()
			fake.Stop()
			s.stopPubSub()
			return nil, err
		}
	} else {
		close(s.tlsDone)
	}
	go func() {
		defer close(s.serveDone)
		// Serve returns http.ErrServerClosed after Close; nothing to report.
		_ = s.http.Serve(&shapedListener{Listener: l, s: s, base: baseCtx, accepted: &s.plainAccepted})
	}()
	return s, nil
}

// URL returns the base URL of the emulator, "http://127.0.0.1:PORT".
func (s *Server) URL() string { return s.url }

// ClientOptions returns the options that make the official client
// (storage.NewClient) talk to this emulator with JSON reads.
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(s.url + "/storage/v1/"),
		option.WithoutAuthentication(),
		storage.WithJSONReads(),
	}
}

// Fake returns the wrapped fake-gcs-server, for what this package does not
// cover (for example versioned buckets via CreateBucketWithOpts). Changes made
// through it bypass the counters, shaping and notifications.
func (s *Server) Fake() *fakestorage.Server { return s.fake }

// Close stops the listener, closes open connections, cancels in-flight
// requests, waits (boundedly) for their handlers and stops the fake and
// the Pub/Sub fake (notifications not published yet are dropped). It is
// idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.baseCancel()
		_ = s.http.Close()
		<-s.serveDone
		if s.tlsHTTP != nil {
			_ = s.tlsHTTP.Close()
		}
		<-s.tlsDone
		// A hook ignoring its request context is given up on after
		// closeWait rather than hang the caller.
		s.inflight.wait(closeWait, true)
		s.fake.Stop()
		s.stopPubSub()
	})
}

// stopPubSub stops the publisher and the Pub/Sub fake, if started.
func (s *Server) stopPubSub() {
	if s.ps == nil {
		return
	}
	s.publishCancel()
	<-s.publishDone
	s.notify.qmu.Lock()
	if s.notify.timer != nil {
		s.notify.timer.Stop()
	}
	s.notify.qmu.Unlock()
	_ = s.ps.Close()
}

// CreateBucket creates an empty bucket (without versioning). Creating an
// existing bucket does nothing.
func (s *Server) CreateBucket(name string) {
	s.fake.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: name})
}

// bucketExists reports whether the fake holds the named bucket.
func (s *Server) bucketExists(bucket string) bool {
	_, err := s.fake.Backend().GetBucket(bucket)
	return err == nil
}

// Put stores data as object name in bucket directly in the fake: no HTTP,
// no counters, no shaping. It returns the new generation, which is strictly
// greater than the object's previous generation. The bucket must exist. A
// seeded object of that name (PutMany) is replaced by the new version.
// The change is notified as an upload's is (notifywatch.go).
func (s *Server) Put(bucket, name string, data []byte) (generation int64, err error) {
	if !s.bucketExists(bucket) {
		return 0, fmt.Errorf("put %s/%s: %w", bucket, name, ErrBucketNotFound)
	}
	w := s.watchObjects(bucket, name)
	generation, err = s.put(bucket, name, data)
	s.settle(w, err == nil)
	return generation, err
}

// put is Put without the notifications.
func (s *Server) put(bucket, name string, data []byte) (int64, error) {
	s.putMu.Lock()
	defer s.putMu.Unlock()
	s.seedMu.Lock()
	defer s.seedMu.Unlock()
	// The seeded version goes to the fake first, so that the new one
	// is above it and takes its place (archiving it where the bucket
	// keeps versions).
	if s.seedPutLocked(bucket, name) {
		return s.seedOneLocked(bucket, name, bytes.Clone(data)), nil
	}
	if err := s.promoteLocked(bucket, name); err != nil {
		return 0, err
	}
	return s.putFakeLocked(bucket, name, data, "")
}

// nextGenerationLocked chooses a generation for a new version of an
// object whose live one is cur (0: none): greater than cur and than any
// chosen before. The fake's own generations are wall-clock microseconds;
// this follows that scale but never repeats or goes back. The caller holds
// putMu until the version is stored.
func (s *Server) nextGenerationLocked(cur int64) int64 {
	gen := max(time.Now().UnixMicro(), s.lastGen+1, cur+1)
	s.lastGen = gen
	return gen
}

// Delete removes the live version of an object directly in the fake (no
// HTTP, no counters). The change is notified as a delete request's is.
func (s *Server) Delete(bucket, name string) error {
	if !s.bucketExists(bucket) {
		return fmt.Errorf("delete %s/%s: %w", bucket, name, ErrBucketNotFound)
	}
	w := s.watchObjects(bucket, name)
	defer s.settle(w, true)
	if s.deleteSeed(bucket, name) {
		s.keepFolders(bucket, name)
		return nil
	}
	if err := s.fake.Backend().DeleteObject(bucket, name); err != nil {
		return fmt.Errorf("delete %s/%s: %w (%v)", bucket, name, ErrObjectNotFound, err)
	}
	s.keepFolders(bucket, name)
	return nil
}

// Object returns a copy of the live version of an object, read directly
// from the fake (no HTTP, no counters). Tests read objects through it, not
// through Fake().GetObject: the fake hands out its own metadata map, which
// a later PATCH changes in place, and the copy is taken under patchMu so
// the race detector sees the order.
func (s *Server) Object(bucket, name string) (fakestorage.Object, error) {
	if !s.bucketExists(bucket) {
		return fakestorage.Object{}, fmt.Errorf("object %s/%s: %w", bucket, name, ErrBucketNotFound)
	}
	if o := s.lookupSeed(bucket, name); o != nil {
		return fakestorage.Object{ObjectAttrs: o.attrs(bucket), Content: bytes.Clone(o.data)}, nil
	}
	s.patchMu.RLock()
	defer s.patchMu.RUnlock()
	o, err := s.fake.GetObject(bucket, name)
	if err != nil {
		return fakestorage.Object{}, fmt.Errorf("object %s/%s: %w", bucket, name, ErrObjectNotFound)
	}
	o.Metadata = maps.Clone(o.Metadata)
	o.Content = bytes.Clone(o.Content)
	return o, nil
}

// Generation returns the generation of the live version of an object.
func (s *Server) Generation(bucket, name string) (int64, error) {
	if !s.bucketExists(bucket) {
		return 0, fmt.Errorf("generation %s/%s: %w", bucket, name, ErrBucketNotFound)
	}
	if o := s.lookupSeed(bucket, name); o != nil {
		return o.gen, nil
	}
	return s.fakeGeneration(bucket, name)
}

// fakeGeneration returns the generation of the live version of an object
// the fake holds.
func (s *Server) fakeGeneration(bucket, name string) (int64, error) {
	obj, err := s.fake.GetObjectStreaming(bucket, name)
	if err != nil {
		return 0, fmt.Errorf("generation %s/%s: %w", bucket, name, ErrObjectNotFound)
	}
	defer obj.Close()
	return obj.Generation, nil
}

// MediaReads returns how many GET requests downloaded (or tried to download)
// the bytes of bucket/name since the last ResetCounters. All three download
// forms count: "/storage/v1/b/B/o/O?alt=media", "/download/storage/v1/b/B/o/O"
// and the XML form "/B/O". Requests are counted when they arrive, so faulted
// and failed reads count too.
func (s *Server) MediaReads(bucket, name string) int64 {
	s.mediaMu.Lock()
	c := s.media[objectKey{bucket, name}]
	s.mediaMu.Unlock()
	if c == nil {
		return 0
	}
	return c.Load()
}

// TotalMediaReads returns the number of media reads of all objects since the
// last ResetCounters.
func (s *Server) TotalMediaReads() int64 { return s.mediaTotal.Load() }

// Requests returns the number of HTTP requests of any kind since the last
// ResetCounters.
func (s *Server) Requests() int64 { return s.requests.Load() }

// ResetCounters sets all counters to zero.
func (s *Server) ResetCounters() {
	s.mediaMu.Lock()
	clear(s.media)
	s.mediaTotal.Store(0)
	s.requests.Store(0)
	s.mediaMu.Unlock()
	s.unauthorized.Store(0)
	s.plainAccepted.Store(0)
	s.tlsAccepted.Store(0)
}

// countMediaRead records one media read of bucket/name.
func (s *Server) countMediaRead(bucket, name string) {
	k := objectKey{bucket, name}
	s.mediaMu.Lock()
	c := s.media[k]
	if c == nil {
		c = new(atomic.Int64)
		s.media[k] = c
	}
	c.Add(1)
	s.mediaTotal.Add(1)
	s.mediaMu.Unlock()
}

// Fault makes every later request naming bucket fail with status and a
// GCS-style JSON error body. Requests name a bucket in the paths
// /storage/v1/b/BUCKET..., /download/storage/v1/b/BUCKET...,
// /upload/storage/v1/b/BUCKET... and the XML form /BUCKET/OBJECT. Status 0
// clears the fault.
func (s *Server) Fault(bucket string, status int) {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	if status == 0 {
		delete(s.faults, bucket)
		return
	}
	s.faults[bucket] = status
}

// SetHook installs a function run for every request before the fake (after
// counting and shaping, before Fault). If it returns handled, the request is
// answered with status (500 if status is 0) and a GCS-style JSON error body,
// and does not reach the fake. A hook that blocks should watch r.Context(),
// which is cancelled when the client goes away or the server closes. nil
// removes the hook.
func (s *Server) SetHook(h func(r *http.Request) (status int, handled bool)) {
	if h == nil {
		s.hook.Store(nil)
		return
	}
	f := hookFunc(h)
	s.hook.Store(&f)
}

// SetAfterHook installs a function run after the fake has handled a
// request, before its (small) answer leaves: a hook that blocks until
// r.Context() ends makes a request that took effect but whose answer the
// client never gets, as when a connection drops at the wrong moment. nil
// removes the hook. Faulted and hooked requests do not reach it.
func (s *Server) SetAfterHook(h func(r *http.Request)) {
	if h == nil {
		s.after.Store(nil)
		return
	}
	s.after.Store(&h)
}

// SetWAN replaces the WAN profile for requests that start from now on. nil
// turns shaping off. The Total limiter is shared by the requests that start
// under the same profile.
func (s *Server) SetWAN(p *WANProfile) {
	if p == nil {
		s.shaper.Store(nil)
		return
	}
	s.shaper.Store(newShaper(*p))
}

// patchMiddleware runs metadata updates (PATCH) alone: the fake's memory
// backend changes the object's metadata map in place, which races with a
// listing or a read encoding it (seen by the race detector).
func (s *Server) patchMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch {
			s.patchMu.Lock()
			defer s.patchMu.Unlock()
		} else {
			s.patchMu.RLock()
			defer s.patchMu.RUnlock()
		}
		next.ServeHTTP(w, r)
	})
}

// countMiddleware counts every request and every media read, then passes
// the request on. It also tracks in-flight handlers for Close.
func (s *Server) countMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.inflight.enter() {
			http.Error(w, "emulator closed", http.StatusServiceUnavailable)
			return
		}
		defer s.inflight.exit()
		s.requests.Add(1)
		if f := s.arrived.Load(); f != nil {
			(*f)(r)
		}
		if t := classify(r); t.mediaRead {
			s.countMediaRead(t.bucket, t.object)
		}
		next.ServeHTTP(w, r)
	})
}

// faultMiddleware runs the hook and the per-bucket faults before the fake.
func (s *Server) faultMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := s.hook.Load(); h != nil {
			if status, handled := (*h)(r); handled {
				if status == 0 {
					status = http.StatusInternalServerError
				}
				writeError(w, status, "emulator: request refused by test hook")
				return
			}
		}
		if t := classify(r); t.bucket != "" {
			s.faultMu.RLock()
			status := s.faults[t.bucket]
			s.faultMu.RUnlock()
			if status != 0 {
				writeError(w, status, fmt.Sprintf("emulator: injected fault for bucket %q", t.bucket))
				return
			}
		}
		if s.loseAnswer(w, r, next) {
			return
		}
		next.ServeHTTP(s.stalling(w, r), r)
		if f := s.after.Load(); f != nil {
			// The fake's answer stays in the response buffer until the
			// handler returns: a blocking after-hook holds it back.
			(*f)(r)
		}
	})
}
