package integration

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// TestMountOverTLS: a mount reaches the emulator over HTTPS, as GCS is
// reached, trusting its certificate with --ca-file: a cold read of a file
// in 16 parallel range reads and the upload of a changed large file (in
// parts) and a small one work. With the default --client-protocol the
// reads take a TCP connection each; with http2 they share the one the
// mount already has. Before the client spoke HTTP/1.1 by default (it
// forced HTTP/2), the default mount also read over one connection.
func TestMountOverTLS(t *testing.T) {
	// A latency per response makes the 16 range reads overlap.
	emu := startEmulator(t, &emulator.WANProfile{Latency: 20 * time.Millisecond})
	const size = 16 << 20
	data := testutil.RandomBytes(size, 23)
	put(t, emu, "big", data)
	for _, c := range []struct {
		proto, small string
		args         []string
	}{
		{"default (http1)", "small-http1", nil},
		{"http2", "small-http2", []string{"--client-protocol", "http2"}},
	} {
		t.Run(c.proto, func(t *testing.T) {
			emu.ResetCounters()
			m := mount(t, emu, mountOpts{tls: true, args: append([]string{
				"--prefetch-chunk-size", "1MiB", "--prefetch-parallelism", "16", "--write-back-delay", "1h",
				"--parallel-upload-threshold", "8MiB", "--part-size", "5MiB"}, c.args...)})
			atMount := emu.TLSConnections()
			if emu.Connections() != 0 {
				t.Errorf("the mount made %d plain HTTP connections; want all over TLS", emu.Connections())
			}
			got, err := os.ReadFile(m.path("big"))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("cold read over TLS: %d bytes, %v; want the %d bytes stored", len(got), err, size)
			}
			during := emu.TLSConnections() - atMount
			t.Logf("%s: %d TCP connection(s) at mount, %d more during a cold read of 16 chunks (%d media reads)",
				c.proto, atMount, during, emu.MediaReads(testBucket, "big"))
			if c.args == nil && during < 4 {
				t.Errorf("default protocol: %d new TCP connections for 16 parallel range reads, want >= 4", during)
			}
			if c.args != nil && during != 0 {
				t.Errorf("http2: %d new TCP connections during the read, want 0 (all on the mount's one)", during)
			}

			// Writes over TLS: a changed large file goes in parts, a
			// small one in one request; the unmount drains them.
			changed := bytes.Clone(data)
			copy(changed[size/2:], []byte("changed over TLS by "+c.proto))
			small := []byte("small file over TLS, " + c.proto)
			if err := os.WriteFile(m.path("big"), changed, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(m.path(c.small), small, 0o644); err != nil {
				t.Fatal(err)
			}
			m.unmount(t)
			if got := object(t, emu, "big"); !bytes.Equal(got, changed) {
				t.Errorf("after the unmount the bucket's big has %d bytes, not the %d written", len(got), len(changed))
			}
			if got := object(t, emu, c.small); !bytes.Equal(got, small) {
				t.Errorf("after the unmount the bucket's small file is %q, want %q", got, small)
			}
			put(t, emu, "big", data) // the next case reads it cold again
		})
	}
}
