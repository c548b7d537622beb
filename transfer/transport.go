package transfer

// The HTTP transport under the GCS client. GCS is HTTPS and offers HTTP/2
// by ALPN; over HTTP/2 Go's client multiplexes every request to a host on
// one TCP connection, so the parallel range reads of a prefetch and the
// parallel parts of an upload share one connection's bandwidth. Measured
// behind the emulator's TLS listener pacing each TCP connection at
// 25 MiB/s (docs/bench.md, issue 23): a cold read of 1 GiB ran at
// 24 MiB/s over h2 and 132 MiB/s over HTTP/1.1 with a connection per
// request. HTTP/1.1 is therefore the default, with an idle pool as large
// as the requests bucketfs has in flight.

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// Protocol names the HTTP version the client speaks to the bucket.
type Protocol string

const (
	// HTTP1 uses HTTP/1.1 only: one TCP connection per request in flight,
	// so parallel transfers get parallel connections. The default.
	HTTP1 Protocol = "http1"
	// HTTP2 offers h2 by ALPN over TLS (HTTP/1.1 over plain http://):
	// requests to a host share one TCP connection.
	HTTP2 Protocol = "http2"
)

// ParseProtocol reads a --client-protocol value ("" means HTTP1).
func ParseProtocol(s string) (Protocol, error) {
	switch p := Protocol(s); p {
	case "":
		return HTTP1, nil
	case HTTP1, HTTP2:
		return p, nil
	}
	return "", fmt.Errorf("unknown client protocol %q: want http1 or http2", s)
}

// minConns is the smallest idle pool: below it, a burst of metadata
// calls (a listing walk, a warm-up) would open and close connections.
const minConns = 16

// newTransport returns the transport of NewGCS: HTTP/1.1 or h2 as o says,
// with an idle pool of o.MaxConnsPerHost connections (at least minConns),
// trusting o.CAFile's certificates besides the system's.
func newTransport(o GCSOptions) (*http.Transport, error) {
	proto, err := ParseProtocol(string(o.Protocol))
	if err != nil {
		return nil, err
	}
	conns := max(o.MaxConnsPerHost, minConns)
	t := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		// Every request in flight keeps its connection for the next one.
		// There is no MaxConnsPerHost: the callers bound the requests in
		// flight (Limited, Parallel), and a request waiting inside the
		// transport for a connection would count against the stall watch.
		MaxIdleConns:          conns * 2,
		MaxIdleConnsPerHost:   conns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Large reads: a bigger socket read buffer saves syscalls.
		ReadBufferSize:  256 << 10,
		WriteBufferSize: 256 << 10,
		Protocols:       new(http.Protocols),
	}
	t.Protocols.SetHTTP1(true)
	t.Protocols.SetHTTP2(proto == HTTP2)
	if o.CAFile != "" {
		roots, err := certPool(o.CAFile)
		if err != nil {
			return nil, err
		}
		t.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	return t, nil
}

// certPool returns the system's roots plus the PEM certificates of file.
func certPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s: no PEM certificate in it", file)
	}
	return roots, nil
}
