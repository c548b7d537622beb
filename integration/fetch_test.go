package integration

import (
	"bytes"
	"os"
	"testing"

	"github.com/bucketfs/bucketfs/internal/testutil"
)

// Issue 27 through a mount: a reader of a big object's last bytes (a
// footer) makes the mount fetch the chunk they are in and nothing more,
// and says so in bucketfs_fetched_bytes_total; a read in order of the
// same object then fetches it whole.
func TestFooterReadFetchesItsChunk(t *testing.T) {
	const chunk = 256 << 10
	data := testutil.RandomBytes(32*chunk, 27)
	emu := startEmulator(t, nil)
	put(t, emu, "big.parquet", data)
	m := mount(t, emu, mountOpts{args: []string{"--prefetch-chunk-size", "256KiB", "--prefetch-whole-max", "1MiB", "--metrics-addr", "127.0.0.1:0"}})
	url := m.metricsURL(t)

	f, err := os.Open(m.path("big.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	footer := make([]byte, 8<<10)
	n, err := f.ReadAt(footer, int64(len(data)-len(footer)))
	f.Close() // the last close ends the download: nothing fetched after it
	if err != nil || n != len(footer) || !bytes.Equal(footer, data[len(data)-len(footer):]) {
		t.Fatalf("footer read: %d bytes, %v (right bytes: %v)", n, err, bytes.Equal(footer, data[len(data)-len(footer):]))
	}
	s := scrape(t, url)
	read, whole := s[`bucketfs_fetched_bytes_total{reason="read"}`], s[`bucketfs_fetched_bytes_total{reason="whole"}`]
	if read < chunk || read > chunk+1 || whole != 0 || s[`bucketfs_fetched_bytes_total{reason="readahead"}`] != 0 {
		t.Fatalf("after a footer read: fetched read %.0f, whole %.0f, readahead %.0f bytes; want the last chunk (%d) and the open's check (1), nothing else",
			read, whole, s[`bucketfs_fetched_bytes_total{reason="readahead"}`], chunk)
	}

	got, err := os.ReadFile(m.path("big.parquet"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read in order: %d bytes, %v (right bytes: %v)", len(got), err, bytes.Equal(got, data))
	}
	s = scrape(t, url)
	if w := s[`bucketfs_fetched_bytes_total{reason="whole"}`]; w == 0 {
		t.Fatal("a read in order of all of a big object did not fetch it whole")
	}
}
