package transfer

import "github.com/bucketfs/bucketfs/internal/crc32c"

// ChunkSums are the CRC32C of a body's bytes, chunk by chunk, as the
// caller read them to get the body's CRC32C: Sums[i] covers the bytes
// [i*Chunk, (i+1)*Chunk), the last chunk ending with the body. A parallel
// upload takes its parts' checksums from them instead of reading each
// part once more. The zero value knows nothing.
type ChunkSums struct {
	Chunk int64
	Sums  []uint32
}

// Range returns the CRC32C of the n bytes at off of a body of size bytes,
// combined from the sums, and whether the sums cover that range: off must
// be at a chunk's start, and off+n at one or at the end of the body.
func (s ChunkSums) Range(off, n, size int64) (uint32, bool) {
	if s.Chunk <= 0 || off < 0 || n < 0 || off+n > size || off%s.Chunk != 0 ||
		int64(len(s.Sums)) != (size+s.Chunk-1)/s.Chunk {
		return 0, false
	}
	end := off + n
	if end%s.Chunk != 0 && end != size {
		return 0, false
	}
	var sum uint32
	for i := off / s.Chunk; i*s.Chunk < end; i++ {
		m := min(s.Chunk, size-i*s.Chunk)
		sum = crc32c.Combine(sum, s.Sums[i], m)
	}
	return sum, true
}
