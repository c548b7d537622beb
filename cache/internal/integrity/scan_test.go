package integrity

import (
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/bucketfs/bucketfs/internal/crc32c"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"github.com/bucketfs/bucketfs/transfer"
)

// refOf returns a Ref with the sums of b, and chunks written marked.
func refOf(b []byte, written ...int) Ref {
	ref := Ref{Chunk: chunk}
	for _, s := range chunkSums(b) {
		ref.Sums = binary.BigEndian.AppendUint32(ref.Sums, s)
	}
	for _, i := range written {
		for len(ref.Written) <= i/8 {
			ref.Written = append(ref.Written, 0)
		}
		ref.Written[i/8] |= 1 << (i % 8)
	}
	return ref
}

// TestScanSumsFile: the scan of a file sums each chunk and the whole, and
// Put makes the upload carry them.
func TestScanSumsFile(t *testing.T) {
	data := pattern(3*chunk+1, 4)
	f := dataFile(t, data, nil)
	for _, ref := range []Ref{{Chunk: chunk}, refOf(data)} {
		s, bad, why := Scan(context.Background(), f, int64(len(data)), ref)
		if bad != nil || why != nil {
			t.Fatalf("Scan of a sound file: bad %v, %v", bad, why)
		}
		if !s.OK || s.Chunk != chunk || !slices.Equal(s.Sums, chunkSums(data)) || s.Whole != crc32c.Checksum(data) {
			t.Fatalf("Scan = %+v; want the file's chunk sums and whole sum %08x", s, crc32c.Checksum(data))
		}
		o := s.Put(transfer.PutOptions{ContentType: "x"})
		if !o.SendCRC32C || o.CRC32C != s.Whole || o.Chunks.Chunk != chunk || !slices.Equal(o.Chunks.Sums, s.Sums) || o.ContentType != "x" {
			t.Errorf("Put = %+v", o)
		}
	}
	if o := (FileSums{}).Put(transfer.PutOptions{ContentType: "x"}); o.SendCRC32C || o.Chunks.Sums != nil || o.ContentType != "x" {
		t.Errorf("Put of a file not read = %+v, want the options unchanged", o)
	}
}

// TestScanReportsUnwrittenMismatch: a chunk the application did not
// write that no longer has the sum of the version it came from fails the
// scan; a chunk it wrote differs freely.
func TestScanReportsUnwrittenMismatch(t *testing.T) {
	base := pattern(5*chunk, 5)
	local := slices.Clone(base)
	copy(local[chunk+3:], "written here") // chunk 1, marked written
	f := dataFile(t, local, testutil.FlipByte(3*chunk+9))
	s, bad, why := Scan(context.Background(), f, int64(len(local)), refOf(base, 1))
	if !slices.Equal(bad, []int{3}) {
		t.Fatalf("bad chunks %v, want [3]", bad)
	}
	if s.OK || s.Sums != nil {
		t.Errorf("a failed scan returns sums %+v; want none", s)
	}
	if why == nil || !strings.HasPrefix(why.Error(), "chunk 3 (1000 bytes at 3000), not written here, has CRC32C ") || !strings.Contains(why.Error(), "the version it came from has") {
		t.Errorf("why = %v", why)
	}

	// Without the damage, the written chunk alone fails nothing.
	f = dataFile(t, local, nil)
	if s, bad, why := Scan(context.Background(), f, int64(len(local)), refOf(base, 1)); !s.OK || bad != nil || why != nil {
		t.Errorf("Scan of a file changed only where it was written: %+v, %v, %v", s.OK, bad, why)
	}
}

// TestScanReportsMissingChunk: a file now shorter than the version it
// came from fails for each chunk with a sum it no longer has, unless the
// chunk was written here (a truncation marks what it cuts).
func TestScanReportsMissingChunk(t *testing.T) {
	base := pattern(4*chunk, 6)
	short := base[:2*chunk]
	f := dataFile(t, short, nil)
	_, bad, why := Scan(context.Background(), f, int64(len(short)), refOf(base))
	if !slices.Equal(bad, []int{2, 3}) || why == nil || why.Error() != "chunk 3 is missing: the file ends at 2000" {
		t.Errorf("Scan of a file cut short: bad %v, %v", bad, why)
	}
	if s, bad, why := Scan(context.Background(), f, int64(len(short)), refOf(base, 2, 3)); !s.OK || bad != nil || why != nil {
		t.Errorf("Scan of a file truncated here: %v, %v, %v", s.OK, bad, why)
	}
}

// TestScanCannotRead: a file that ends before size, a canceled scan, or
// a ref without a chunk size gives no sums and no failure: the file is
// sent without a checksum.
func TestScanCannotRead(t *testing.T) {
	data := pattern(3*chunk, 7)
	f := dataFile(t, data, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, run := range map[string]func() (FileSums, []int, error){
		"short file": func() (FileSums, []int, error) {
			return Scan(context.Background(), f, int64(len(data))+10, refOf(data))
		},
		"canceled":      func() (FileSums, []int, error) { return Scan(ctx, f, int64(len(data)), refOf(data)) },
		"no chunk size": func() (FileSums, []int, error) { return Scan(context.Background(), f, int64(len(data)), Ref{}) },
	} {
		if s, bad, why := run(); s.OK || bad != nil || why != nil {
			t.Errorf("%s: %+v, %v, %v; want nothing", name, s, bad, why)
		}
	}
}
