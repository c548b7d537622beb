package transfer

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"github.com/bucketfs/bucketfs/internal/testutil/testemu"
	"golang.org/x/sync/errgroup"
)

// startTLSEmulator runs an emulator with a TLS listener whose responses
// wait 50 ms (so that parallel requests overlap), and writes its
// certificate to a file for GCSOptions.CAFile.
func startTLSEmulator(t *testing.T) (*emulator.Server, string) {
	t.Helper()
	emu := testemu.Start(t, emulator.Options{Buckets: []string{bucketName}, TLS: true,
		WAN: &emulator.WANProfile{Latency: 50 * time.Millisecond}})
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, emu.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	return emu, ca
}

// TestParallelReadsOverTLS: over TLS, parallel range reads take a TCP
// connection each with the default protocol (HTTP/1.1), and share one
// with HTTP2. With ForceAttemptHTTP2, as NewGCS had, the default made one.
func TestParallelReadsOverTLS(t *testing.T) {
	emu, ca := startTLSEmulator(t)
	data := testutil.RandomBytes(8<<20, 7)
	put(t, emu, "big", data)
	const parts = 8
	for _, proto := range []Protocol{"", HTTP2} {
		ctx := testutil.Ctx(t, 60*time.Second)
		g, err := NewGCS(ctx, bucketName, GCSOptions{Endpoint: emu.TLSURL(), Anonymous: true, CAFile: ca, Protocol: proto})
		if err != nil {
			t.Fatal(err)
		}
		emu.ResetCounters()
		if err := g.CheckAccess(ctx); err != nil {
			t.Fatalf("%q: %v", proto, err)
		}
		bufs := make([]bytes.Buffer, parts)
		var eg errgroup.Group
		step := int64(len(data) / parts)
		for i := range parts {
			eg.Go(func() error {
				_, err := g.ReadRange(ctx, "big", 0, int64(i)*step, step, &bufs[i])
				return err
			})
		}
		if err := eg.Wait(); err != nil {
			t.Fatalf("%q: %v", proto, err)
		}
		for i := range parts {
			if !bytes.Equal(bufs[i].Bytes(), data[int64(i)*step:int64(i+1)*step]) {
				t.Fatalf("%q: range %d: wrong bytes", proto, i)
			}
		}
		n := emu.TLSConnections()
		t.Logf("protocol %q: %d parallel range reads over %d TCP connection(s)", proto, parts, n)
		if proto == HTTP2 && n != 1 {
			t.Errorf("http2: %d TCP connections, want 1", n)
		}
		if proto == "" && n < parts/2 {
			t.Errorf("default protocol: %d TCP connections for %d reads at once, want >= %d", n, parts, parts/2)
		}
		g.Close()
	}
}

// TestCAFile: a TLS endpoint with a certificate the system does not trust
// is refused without CAFile, and a CAFile that is missing or holds no
// certificate is an error at NewGCS.
func TestCAFile(t *testing.T) {
	emu, _ := startTLSEmulator(t)
	ctx := testutil.Ctx(t, 30*time.Second)
	g, err := NewGCS(ctx, bucketName, GCSOptions{Endpoint: emu.TLSURL(), Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.CheckAccess(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("an untrusted certificate: CheckAccess = %v, want a certificate error", err)
	}
	junk := filepath.Join(t.TempDir(), "junk.pem")
	os.WriteFile(junk, []byte("not a certificate"), 0o644)
	for _, f := range []string{junk, filepath.Join(t.TempDir(), "missing.pem")} {
		if _, err := NewGCS(ctx, bucketName, GCSOptions{Endpoint: emu.TLSURL(), Anonymous: true, CAFile: f}); err == nil {
			t.Errorf("CAFile %s: no error", f)
		}
	}
}

func TestParseProtocol(t *testing.T) {
	for in, want := range map[string]Protocol{"": HTTP1, "http1": HTTP1, "http2": HTTP2} {
		if got, err := ParseProtocol(in); err != nil || got != want {
			t.Errorf("ParseProtocol(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"h2", "HTTP2", "http3", "1"} {
		if _, err := ParseProtocol(in); err == nil {
			t.Errorf("ParseProtocol(%q): no error", in)
		}
	}
}
