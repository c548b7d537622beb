package integrity

import (
	"context"
	"fmt"
	"os"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/internal/crc32c"
	"github.com/bucketfs/bucketfs/transfer"
)

// Ref is what a changed file's record said of its chunks when its upload
// started: the size of its chunks, the sums of the version it is based
// on (durable.Record.Sums), and the chunks written here since
// (durable.Record.Written), whose sums no longer hold.
type Ref struct {
	Chunk         int64
	Sums, Written []byte
}

// recorded returns the sum ref keeps for chunk i, if the chunk was not
// written here since it was taken.
func (ref Ref) recorded(i int) (uint32, bool) {
	r := durable.Record{Complete: true, Sums: ref.Sums, Written: ref.Written}
	return r.ChunkSum(i)
}

// FileSums is what an upload read of a file: the sum of each chunk and of
// the whole. The zero value is a file not read: its upload carries no
// checksum.
type FileSums struct {
	OK    bool // the file was read: the sums below are its
	Chunk int64
	Sums  []uint32
	Whole uint32
}

// Put adds the file's checksum to o, so that the bucket refuses bytes
// that are not the ones read here, and its chunks' (a parallel upload's
// parts take theirs from them, without reading the file again).
func (s FileSums) Put(o transfer.PutOptions) transfer.PutOptions {
	if s.OK {
		o.CRC32C, o.SendCRC32C = s.Whole, true
		o.Chunks = transfer.ChunkSums{Chunk: s.Chunk, Sums: s.Sums}
	}
	return o
}

// Scan reads the size bytes of f, a changed file about to be uploaded,
// in chunks of ref.Chunk bytes: it sums every chunk and the whole (the
// upload carries that sum), and checks each chunk the application did
// not write against the sum ref keeps of it; a chunk ref has a sum for
// that lies past size is missing, and fails too. It returns the sums if
// every check passed; else the zero FileSums, the chunks that failed and
// why the last of them did. A file it cannot read, a ref without a chunk
// size, or ctx ending, gives the zero FileSums and no failure: the file
// is uploaded without a checksum, and the upload, reading it too, says
// why it cannot.
func Scan(ctx context.Context, f *os.File, size int64, ref Ref) (s FileSums, bad []int, why error) {
	chunk := ref.Chunk
	if chunk <= 0 {
		return FileSums{}, nil, nil
	}
	n := int((size + chunk - 1) / chunk)
	out := FileSums{OK: true, Chunk: chunk, Sums: make([]uint32, n)}
	// No bigger than the file: 1 MiB zeroed for each small file sent
	// was a tenth of the CPU time of writing many of them out.
	buf := make([]byte, min(chunk, size, 1<<20))
	for i := range max(n, len(ref.Sums)/4) {
		if ctx.Err() != nil {
			return FileSums{}, nil, nil
		}
		want, check := ref.recorded(i)
		if i >= n {
			if check { // recorded, never written here, and gone from the file
				bad, why = append(bad, i), fmt.Errorf("chunk %d is missing: the file ends at %d", i, size)
			}
			continue
		}
		off, m := durable.ChunkSpan(i, chunk, size)
		sum, err := durable.ReadChunkSum(f, buf, off, m)
		if err != nil {
			return FileSums{}, nil, nil
		}
		out.Sums[i] = sum
		out.Whole = crc32c.Combine(out.Whole, sum, m)
		if check && sum != want {
			bad, why = append(bad, i), fmt.Errorf("chunk %d (%d bytes at %d), not written here, has CRC32C %08x; the version it came from has %08x", i, m, off, sum, want)
		}
	}
	if len(bad) > 0 {
		return FileSums{}, bad, why
	}
	return out, nil, nil
}
