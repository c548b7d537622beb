package transfer

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
)

// TestDownloadReaderRetriesOnce: a fetch that failed for a reason a new
// request may not meet is tried once more for the reader, which gets its
// bytes and no error; the log says WARN and that it was retried, not
// ERROR.
func TestDownloadReaderRetriesOnce(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	const size = 3 * testChunk
	data := testutil.Pattern(size, 27)
	gen := put(t, emu, "obj", data)
	ctx := testutil.Ctx(t, 60*time.Second)
	var failed atomic.Bool
	emu.SetHook(func(r *http.Request) (int, bool) {
		if isMediaRead(r) && failed.CompareAndSwap(false, true) {
			return http.StatusBadRequest, true // not retried by the storage client
		}
		return 0, false
	})
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	dst := newMemFile(size, 0)
	d := NewDownload(g, "obj", gen, size, dst, nil, DownloadOptions{ChunkSize: testChunk, Parallelism: 1, Logger: log})
	defer d.Stop()
	if err := d.Ensure(ctx, 2*testChunk, 1); err != nil {
		t.Fatalf("Ensure: %v (the failed fetch was not retried for the reader)", err)
	}
	if !bytes.Equal(dst.bytes(2*testChunk, testChunk), data[2*testChunk:]) {
		t.Error("chunk 2 holds the wrong bytes after the retry")
	}
	if got := emu.MediaReads(bucketName, "obj"); got != 2 {
		t.Errorf("MediaReads = %d, want 2 (the failure and the retry)", got)
	}
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "retried") || strings.Contains(out, "level=ERROR") {
		t.Errorf("log = %q, want one WARN that says the read was retried", out)
	}
}

// TestSizeMismatchSaysWhich: the error of a read that got another number
// of bytes than asked names which way it differs, with both numbers.
func TestSizeMismatchSaysWhich(t *testing.T) {
	short := sizeMismatch("b", "o", 7, 0, 14, 20).Error()
	long := sizeMismatch("b", "o", 7, 0, 26, 20).Error()
	for _, c := range []struct{ msg, want, not string }{{short, "shorter", "longer"}, {long, "longer", "shorter"}} {
		if !strings.Contains(c.msg, c.want) || strings.Contains(c.msg, c.not) || !strings.Contains(c.msg, "want 20") {
			t.Errorf("message %q: want it to say %q (not %q) and both numbers", c.msg, c.want, c.not)
		}
	}
	if !strings.Contains(short, "got 14") || !strings.Contains(long, "got 26") {
		t.Errorf("messages %q, %q lack the bytes got", short, long)
	}
}
