package emulator

// The TLS listener: GCS is reached over HTTPS and offers HTTP/2 by ALPN,
// which changes how a Go client spreads parallel requests over TCP
// connections (one multiplexed connection instead of one per request).
// With Options.TLS the emulator serves the same handler on a second
// listener with a self-signed certificate made at start, offering h2 and
// http/1.1, so that tests and the benchmark see what production sees.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"time"
)

// selfSigned makes a certificate for 127.0.0.1, ::1 and localhost (plus
// host, if it is another name or address), valid for a day, and returns it
// with its PEM encoding (the certificate only: what a client trusts).
func selfSigned(host string) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "bucketfs emulator"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // self-signed: it is its own root
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsLoopback() && !ip.IsUnspecified() {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	} else if ip == nil && host != "localhost" && host != "" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// startTLS listens on addr and serves h behind TLS, with ALPN offering h2
// and http/1.1. Bytes are shaped on each TCP connection, under TLS (see
// shapedListener). It fills in s.tlsURL, s.certPEM and s.tlsHTTP.
func (s *Server) startTLS(baseCtx context.Context, addr string, h http.Handler, base *http.Server) error {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("emulator: listen %s (TLS): %w", addr, err)
	}
	host, port, err := net.SplitHostPort(l.Addr().String())
	if err != nil {
		l.Close()
		return fmt.Errorf("emulator: TLS listener address: %w", err)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	cert, certPEM, err := selfSigned(host)
	if err != nil {
		l.Close()
		return fmt.Errorf("emulator: making a certificate: %w", err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: base.ReadHeaderTimeout,
		BaseContext:       base.BaseContext,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		Protocols:         new(http.Protocols),
	}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetHTTP2(true)
	s.tlsURL = "https://" + net.JoinHostPort(host, port)
	s.certPEM = certPEM
	s.tlsHTTP = srv
	sl := &shapedListener{Listener: l, s: s, base: baseCtx, accepted: &s.tlsAccepted}
	go func() {
		defer close(s.tlsDone)
		// ServeTLS puts TLS (and its ALPN list, from Protocols) over the
		// shaped TCP connections; it returns http.ErrServerClosed after
		// Close.
		_ = srv.ServeTLS(sl, "", "")
	}()
	return nil
}

// TLSURL returns the base URL of the TLS listener, "https://127.0.0.1:PORT",
// or "" without Options.TLS. It serves the same buckets as URL.
func (s *Server) TLSURL() string { return s.tlsURL }

// CertPEM returns the TLS listener's self-signed certificate in PEM, for a
// client to trust (bucketfs --ca-file), or nil without Options.TLS.
func (s *Server) CertPEM() []byte { return s.certPEM }

// TLSConnections returns how many TCP connections the TLS listener has
// accepted since the last ResetCounters.
func (s *Server) TLSConnections() int64 { return s.tlsAccepted.Load() }

// Connections returns how many TCP connections the plain HTTP listener has
// accepted since the last ResetCounters.
func (s *Server) Connections() int64 { return s.plainAccepted.Load() }
