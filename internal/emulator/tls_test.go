package emulator

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"google.golang.org/api/option"
)

// tlsClient returns an official client for s's TLS listener that trusts
// its certificate, speaking h2 (by ALPN) or HTTP/1.1 only.
func tlsClient(t *testing.T, s *Server, h2 bool) *storage.Client {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.CertPEM()) {
		t.Fatal("CertPEM holds no certificate")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, Protocols: new(http.Protocols), MaxIdleConnsPerHost: 16}
	tr.Protocols.SetHTTP1(true)
	tr.Protocols.SetHTTP2(h2)
	t.Cleanup(tr.CloseIdleConnections)
	c, err := storage.NewClient(t.Context(),
		option.WithEndpoint(s.TLSURL()+"/storage/v1/"),
		option.WithHTTPClient(&http.Client{Transport: tr}),
		storage.WithJSONReads())
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTLSListener: the same buckets over HTTPS, h2 offered by ALPN, with a
// certificate a client can trust from CertPEM.
func TestTLSListener(t *testing.T) {
	ctx := testutil.Ctx(t, 30*time.Second)
	s, err := Start(Options{Buckets: []string{testBucket}, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	data := testutil.Pattern(1<<20, 3)
	if _, err := s.Put(testBucket, "o", data); err != nil {
		t.Fatal(err)
	}
	for _, h2 := range []bool{false, true} {
		c := tlsClient(t, s, h2)
		var proto string
		s.SetHook(func(r *http.Request) (int, bool) {
			proto = r.Proto
			return 0, false
		})
		got, err := readAll(ctx, c, testBucket, "o", -1, 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("h2=%v: read %d bytes, %v", h2, len(got), err)
		}
		want := "HTTP/1.1"
		if h2 {
			want = "HTTP/2.0"
		}
		if proto != want {
			t.Errorf("h2=%v: the request came as %s, want %s", h2, proto, want)
		}
		w := c.Bucket(testBucket).Object("up").NewWriter(ctx)
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("h2=%v: upload: %v", h2, err)
		}
	}
	s.SetHook(nil)
	if s.TLSConnections() < 2 || s.Connections() != 0 {
		t.Errorf("connections: TLS %d, plain %d; want >= 2 and 0", s.TLSConnections(), s.Connections())
	}
}

// TestWANPerTCPConnection: the profile's PerConn limits a TCP connection,
// not a request. Two 2 MiB reads at once over one h2 connection share its
// 4 MiB/s and take about a second; over HTTP/1.1 they take a connection
// each. Shaped per request, the h2 reads would end in half the time.
func TestWANPerTCPConnection(t *testing.T) {
	ctx := testutil.Ctx(t, 60*time.Second)
	s, err := Start(Options{Buckets: []string{testBucket}, TLS: true, WAN: &WANProfile{PerConn: 4 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	data := testutil.Pattern(2<<20, 5)
	for _, n := range []string{"a", "b"} {
		if _, err := s.Put(testBucket, n, data); err != nil {
			t.Fatal(err)
		}
	}
	for _, h2 := range []bool{true, false} {
		c := tlsClient(t, s, h2)
		s.ResetCounters()
		// A first call makes the connection: two requests at once on a
		// new client may dial twice before ALPN says h2.
		if _, err := c.Bucket(testBucket).Object("a").Attrs(ctx); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		t0 := time.Now()
		for _, n := range []string{"a", "b"} {
			wg.Go(func() {
				r, err := c.Bucket(testBucket).Object(n).NewReader(ctx)
				if err != nil {
					errs <- err
					return
				}
				defer r.Close()
				got, err := io.ReadAll(r)
				if err == nil && !bytes.Equal(got, data) {
					err = errors.New(n + ": wrong bytes")
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("h2=%v: %v", h2, err)
			}
		}
		d := time.Since(t0)
		t.Logf("h2=%v: 2 x 2 MiB at 4 MiB/s per connection in %v over %d connection(s)", h2, d, s.TLSConnections())
		if h2 {
			// 4 MiB through one connection at 4 MiB/s, less a burst.
			if d < 900*time.Millisecond {
				t.Errorf("2 x 2 MiB over one h2 connection took %v, want >= 0.9s (paced per connection)", d)
			}
			if n := s.TLSConnections(); n != 1 {
				t.Errorf("h2: %d TCP connections, want 1", n)
			}
		} else if n := s.TLSConnections(); n < 2 {
			t.Errorf("HTTP/1.1: %d TCP connections for 2 reads at once, want 2", n)
		}
	}
}
