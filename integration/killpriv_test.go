package integration

import (
	"os"
	"testing"
)

// TestWritesAskNoCapability: a write(2) is one FUSE request. The kernel
// asked for the file's security.capability before every write (to see
// whether the write must drop it) until the file system took over
// clearing setuid and setgid (HANDLE_KILLPRIV_V2, fs/killpriv.go):
// 1,000 writes were 1,000 WRITE and 1,000 GETXATTR requests. That the
// bits are still cleared as on a local disk is the POSIX case
// users/setuid-cleared (TestPOSIXUsers).
func TestWritesAskNoCapability(t *testing.T) {
	emu := startEmulator(t, nil)
	// Writes through the daemon (by default the kernel writes a new file
	// itself, and none of them is a FUSE request).
	m := mount(t, emu, mountOpts{args: []string{"--metrics-addr", "127.0.0.1:0", "--write-back-delay", "1h", "--passthrough-writes=false"}})
	url := m.metricsURL(t)
	f, err := os.Create(m.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := scrape(t, url)
	const writes = 300
	buf := make([]byte, 4096)
	for i := range writes {
		if _, err := f.WriteAt(buf, int64(i)*4096); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	after := scrape(t, url)
	if d := after[`bucketfs_fuse_requests_total{op="write"}`] - before[`bucketfs_fuse_requests_total{op="write"}`]; d != writes {
		t.Errorf("%v WRITE requests for %d writes, want %d", d, writes, writes)
	}
	if d := after[`bucketfs_fuse_requests_total{op="getxattr"}`] - before[`bucketfs_fuse_requests_total{op="getxattr"}`]; d > 1 {
		t.Errorf("%v GETXATTR requests during %d writes, want at most 1 (the first write's check)", d, writes)
	}
}
