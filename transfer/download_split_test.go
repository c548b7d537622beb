package transfer

import (
	"bytes"
	"errors"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/crc32c"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// Medium objects (issue 37): a chunk of an object with fewer chunks than
// Parallelism is fetched by several range requests at once, each of
// MinRange bytes at least; the chunk is still the unit of presence and of
// checksums, its sum the parts' combined.

func TestDownloadSplitsChunks(t *testing.T) {
	const minRange = 512
	for _, tt := range []struct {
		name   string
		size   int
		par    int
		starts []int64 // the media reads' first bytes
	}{
		{"one chunk, in 8", testChunk, 16, []int64{0, 512, 1024, 1536, 2048, 2560, 3072, 3584}},
		{"one chunk, as many as the parallelism", testChunk, 3, []int64{0, 1366, 2731}},
		{"four chunks, 4 each", 4 * testChunk, 16, func() []int64 {
			var out []int64
			for off := int64(0); off < 4*testChunk; off += 1024 {
				out = append(out, off)
			}
			return out
		}()},
		{"a last chunk too short to split", testChunk + 1000, 16, []int64{0, 512, 1024, 1536, 2048, 2560, 3072, 3584, testChunk}},
		{"as many chunks as the parallelism: one request each", 16 * testChunk, 16, chunkStarts(16, func(int) bool { return true })},
		{"under twice the least range: one request", 1000, 16, []int64{0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			emu := startEmulator(t)
			g := newTestGCS(t, emu)
			data := testutil.Pattern(tt.size, 37)
			gen := put(t, emu, "obj", data)
			var rec rangeRecorder
			emu.SetHook(rec.hook)
			ctx := testutil.Ctx(t, 60*time.Second)
			dst := newMemFile(tt.size, 0)
			d := NewDownload(g, "obj", gen, int64(tt.size), dst, nil, DownloadOptions{
				ChunkSize: testChunk, MinRange: minRange, Parallelism: tt.par, CRC32C: crc32c.Checksum(data), CheckCRC: true})
			defer d.Stop()
			d.Start()
			waitClosed(t, ctx, d.Complete(), "the download to complete")
			if err := d.EnsureComplete(ctx); err != nil {
				t.Fatal(err)
			}
			if got := rec.sorted(); !slices.Equal(got, tt.starts) {
				t.Errorf("media reads at %v, want %v", got, tt.starts)
			}
			if !bytes.Equal(dst.bytes(0, int64(tt.size)), data) {
				t.Error("the copy differs from the object")
			}
			_, summed, sums := d.Snapshot()
			for i := range sums {
				off := int64(i) * testChunk
				n := min(int64(testChunk), int64(tt.size)-off)
				if want := crc32c.Checksum(data[off : off+n]); !summed[i] || sums[i] != want {
					t.Errorf("chunk %d: summed %v, sum %08x; want %08x", i, summed[i], sums[i], want)
				}
			}
		})
	}
}

// A reader waits only for the parts before its bytes, and gets them right.
func TestDownloadSplitReaderGetsItsBytes(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	const size = 2 * testChunk
	data := testutil.Pattern(size, 38)
	gen := put(t, emu, "obj", data)
	ctx := testutil.Ctx(t, 60*time.Second)
	dst := newMemFile(size, 0)
	d := NewDownload(g, "obj", gen, size, dst, nil, DownloadOptions{ChunkSize: testChunk, MinRange: 512, Parallelism: 16})
	defer d.Stop()
	for _, off := range []int64{3000, 100, testChunk + 2000} {
		if err := d.Ensure(ctx, off, 700); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dst.bytes(off, 700), data[off:off+700]) {
			t.Errorf("bytes at %d differ from the object's", off)
		}
	}
}

// A part that fails fails its chunk: the chunk stays absent (whatever the
// other parts wrote), and the next Ensure fetches all of it again.
func TestDownloadSplitPartFails(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	const size = testChunk
	data := testutil.Pattern(size, 39)
	gen := put(t, emu, "obj", data)
	ctx := testutil.Ctx(t, 60*time.Second)
	var reads atomic.Int64
	emu.SetHook(func(r *http.Request) (int, bool) {
		if isMediaRead(r) && rangeStart(r) == 2048 && reads.Add(1) == 1 {
			return http.StatusForbidden, true
		}
		return 0, false
	})
	dst := newMemFile(size, 0)
	d := NewDownload(g, "obj", gen, size, dst, nil, DownloadOptions{
		ChunkSize: testChunk, MinRange: 512, Parallelism: 16, CRC32C: crc32c.Checksum(data), CheckCRC: true})
	defer d.Stop()
	if err := d.Ensure(ctx, 0, 10); !errors.Is(err, ErrPermission) {
		t.Fatalf("Ensure with a part refused = %v, want ErrPermission", err)
	}
	if p := d.Present(); p[0] {
		t.Fatal("a chunk with a failed part counts as present")
	}
	if err := d.Ensure(ctx, 0, size); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst.bytes(0, size), data) {
		t.Error("the copy differs from the object")
	}
	if p := d.Present(); !p[0] {
		t.Error("the chunk is not present after its second fetch")
	}
}

// An object of one chunk split in parts is still checked before any
// reader sees a byte: with a checksum that does not match, it is fetched
// twice (every part) and fails.
func TestDownloadSplitChecksFirst(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	const size = testChunk
	data := testutil.Pattern(size, 40)
	gen := put(t, emu, "obj", data)
	ctx := testutil.Ctx(t, 60*time.Second)
	dst := newMemFile(size, 0)
	d := NewDownload(g, "obj", gen, size, dst, nil, DownloadOptions{
		ChunkSize: testChunk, MinRange: 512, Parallelism: 16, CRC32C: crc32c.Checksum(data) ^ 1, CheckCRC: true})
	defer d.Stop()
	if err := d.Ensure(ctx, 4000, 10); !errors.Is(err, ErrChecksum) {
		t.Fatalf("Ensure = %v, want ErrChecksum", err)
	}
	if got := emu.MediaReads(bucketName, "obj"); got != 16 {
		t.Errorf("MediaReads = %d, want 16 (8 parts, twice)", got)
	}
}

// An open's check (EnsureBegun) tells that the version is there without
// waiting for the whole-object check of a one-chunk object: with a
// checksum that does not match, it succeeds, and a read still fails;
// of an object that is gone, it fails.
func TestDownloadEnsureBegun(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	const size = testChunk
	data := testutil.Pattern(size, 41)
	gen := put(t, emu, "obj", data)
	ctx := testutil.Ctx(t, 60*time.Second)
	d := NewDownload(g, "obj", gen, size, newMemFile(size, 0), nil, DownloadOptions{
		ChunkSize: testChunk, MinRange: 512, Parallelism: 16, CRC32C: crc32c.Checksum(data) ^ 1, CheckCRC: true})
	defer d.Stop()
	if err := d.EnsureBegun(ctx, 0); err != nil {
		t.Fatalf("EnsureBegun = %v, want nil: the version is there", err)
	}
	if err := d.Ensure(ctx, 0, 1); !errors.Is(err, ErrChecksum) {
		t.Fatalf("Ensure after EnsureBegun = %v, want ErrChecksum: no byte of a copy that fails its check is shown", err)
	}

	gone := NewDownload(g, "obj", gen+1, size, newMemFile(size, 0), nil, DownloadOptions{
		ChunkSize: testChunk, MinRange: 512, Parallelism: 16, CRC32C: crc32c.Checksum(data), CheckCRC: true})
	defer gone.Stop()
	if err := gone.EnsureBegun(ctx, 0); !IsStale(err) {
		t.Fatalf("EnsureBegun of a generation that is not there = %v, want a stale error", err)
	}
}
