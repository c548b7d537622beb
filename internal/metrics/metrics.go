// Package metrics exports what a running mount does as Prometheus
// metrics: FUSE requests (fed by fs.Options.OpObserver), bucket calls
// (a transfer.Observer for transfer.Metered), and the cache and its
// write-back (read from cache.Status at every scrape). docs/operating.md lists
// every series.
//
// It is the only package of bucketfs that imports the Prometheus client;
// cmd/bucketfs wires it.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/bucketfs/bucketfs/cache"
	"github.com/bucketfs/bucketfs/transfer"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"
)

// Metrics holds the collectors of one mount, in a registry of its own.
type Metrics struct {
	reg *prometheus.Registry

	fuseRequests *prometheus.CounterVec
	fuseErrors   *prometheus.CounterVec
	fuseDuration *prometheus.HistogramVec

	bucketRequests *prometheus.CounterVec
	bucketErrors   *prometheus.CounterVec
	bucketDuration *prometheus.HistogramVec
	bucketBytes    *prometheus.CounterVec
	bucketRetries  *prometheus.CounterVec
	bucketInFlight *prometheus.GaugeVec
	stalled        *prometheus.CounterVec // stall.go
}

// BucketMethods are the method labels of the bucket series, created at
// zero so that rates start from the first scrape.
var BucketMethods = []string{
	"stat", "list", "read", "put", "compose", "copy", "setmetadata", "delete", "renamefolder", "deletefolders", "check",
	"multipart_initiate", "multipart_upload_part", "multipart_complete", "multipart_abort", "multipart_list",
}

// New makes the collectors and registers them, with the Go runtime and
// process collectors and bucketfs_build_info{version}.
func New(version string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.fuseRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketfs_fuse_requests_total",
		Help: "FUSE requests answered by the daemon, by operation.",
	}, []string{"op"})
	m.fuseErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketfs_fuse_errors_total",
		Help: "FUSE requests answered with an error, by operation and errno (ENOENT on lookup is a normal answer).",
	}, []string{"op", "errno"})
	m.fuseDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "bucketfs_fuse_request_duration_seconds",
		Help:    "Time the daemon took to answer a FUSE request, by operation.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 4, 10), // 50µs .. 13s
	}, []string{"op"})
	m.bucketRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketfs_bucket_requests_total",
		Help: "Calls to the bucket, by method (a call may send several HTTP requests: see retries).",
	}, []string{"method"})
	m.bucketErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketfs_bucket_errors_total",
		Help: "Calls to the bucket that failed, by method and kind (not_found on stat is a normal answer).",
	}, []string{"method", "kind"})
	m.bucketDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "bucketfs_bucket_request_duration_seconds",
		Help:    "Duration of calls to the bucket, retries included, by method.",
		Buckets: prometheus.ExponentialBuckets(1e-3, 4, 9), // 1ms .. 65s
	}, []string{"method"})
	m.bucketBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketfs_bucket_bytes_total",
		Help: "Object bytes moved, by method: downloaded by read, uploaded by put and multipart_upload_part.",
	}, []string{"method"})
	m.bucketRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketfs_bucket_retries_total",
		Help: "HTTP requests the storage client sent again within one call (its own retries of idempotent calls), by method.",
	}, []string{"method"})
	m.bucketInFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bucketfs_bucket_requests_in_flight",
		Help: "Calls to the bucket running now, by method.",
	}, []string{"method"})
	for _, method := range BucketMethods {
		m.bucketRequests.WithLabelValues(method)
		m.bucketBytes.WithLabelValues(method)
		m.bucketRetries.WithLabelValues(method)
		m.bucketInFlight.WithLabelValues(method)
	}
	m.stalled = newStallCounter()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "bucketfs_build_info",
		Help:        "Always 1; the version label says which bucketfs runs.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	build.Set(1)
	m.reg.MustRegister(
		m.fuseRequests, m.fuseErrors, m.fuseDuration,
		m.bucketRequests, m.bucketErrors, m.bucketDuration, m.bucketBytes, m.bucketRetries, m.bucketInFlight,
		m.stalled, build,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Registry is where the collectors are registered.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// FUSEOp records one FUSE request; it has the type of fs.OpObserver.
func (m *Metrics) FUSEOp(op string, d time.Duration, errno syscall.Errno) {
	m.fuseRequests.WithLabelValues(op).Inc()
	m.fuseDuration.WithLabelValues(op).Observe(d.Seconds())
	if errno != 0 {
		m.fuseErrors.WithLabelValues(op, errnoName(errno)).Inc()
	}
}

func errnoName(e syscall.Errno) string {
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return fmt.Sprintf("errno_%d", int(e))
}

// Bucket returns the observer to give transfer.NewMetered.
func (m *Metrics) Bucket() transfer.Observer { return bucketObserver{m} }

type bucketObserver struct{ m *Metrics }

func (o bucketObserver) Started(method string) {
	o.m.bucketInFlight.WithLabelValues(method).Inc()
}

func (o bucketObserver) Finished(method string, d time.Duration, n int64, err error) {
	m := o.m
	m.bucketInFlight.WithLabelValues(method).Dec()
	m.bucketRequests.WithLabelValues(method).Inc()
	m.bucketDuration.WithLabelValues(method).Observe(d.Seconds())
	if n > 0 {
		m.bucketBytes.WithLabelValues(method).Add(float64(n))
	}
	if err != nil {
		m.bucketErrors.WithLabelValues(method, ErrorKind(err)).Inc()
	}
}

func (o bucketObserver) Retried(method string) {
	o.m.bucketRetries.WithLabelValues(method).Inc()
}

// ErrorKind names the class of a bucket error, for the kind label.
func ErrorKind(err error) string {
	switch {
	case errors.Is(err, transfer.ErrNotExist):
		return "not_found"
	case errors.Is(err, transfer.ErrBucketNotExist):
		return "bucket_not_found"
	case errors.Is(err, transfer.ErrPrecondition):
		return "precondition"
	case errors.Is(err, transfer.ErrPermission):
		return "permission"
	case errors.Is(err, transfer.ErrUnauthenticated):
		return "unauthenticated"
	case errors.Is(err, transfer.ErrMultipartUnsupported):
		return "multipart_unsupported"
	case errors.Is(err, transfer.ErrOffline):
		return "offline"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	default:
		return "other"
	}
}

// StatusSource is what the cache collector reads; *cache.Cache is one.
type StatusSource interface {
	Status(maxDirty int) cache.Status
}

// WatchCache registers the cache and write-back series, read from
// src.Status once per scrape.
func (m *Metrics) WatchCache(src StatusSource) {
	m.reg.MustRegister(newCacheCollector(src))
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: nil})
}

// ListenAddr completes addr for listening: a bare port ("9100") or a port
// with no host (":9100") is bound to 127.0.0.1 only, so that metrics are
// not served to the network unless a host is named ("0.0.0.0:9100").
func ListenAddr(addr string) (string, error) {
	if addr == "" {
		return "", errors.New("empty address")
	}
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("metrics address %q: %w", addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil || port == "" {
		return "", fmt.Errorf("metrics address %q: bad port", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// Server serves /metrics over HTTP.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Loopback reports whether addr (completed by ListenAddr) listens on a
// loopback address only: the condition for serving profiles (Serve).
func Loopback(addr string) bool {
	full, err := ListenAddr(addr)
	if err != nil {
		return false
	}
	host, _, _ := net.SplitHostPort(full)
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Serve listens on addr (completed by ListenAddr) and serves m at
// /metrics until Close; with profiles, also Go's runtime profiles at
// /debug/pprof/ (heap, goroutines, CPU...), for an operator on the
// machine: the caller checks that addr is a loopback one (Loopback).
func (m *Metrics) Serve(addr string, profiles bool, log *slog.Logger) (*Server, error) {
	full, err := ListenAddr(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", full)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	if profiles {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "bucketfs: metrics are at /metrics")
	})
	s := &Server{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server and waits for it.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	<-s.done
	return err
}
