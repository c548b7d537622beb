package integrity

import (
	"fmt"
	"os"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
)

// Want is a chunk to check: its index and the CRC-32C its record keeps
// for it.
type Want struct {
	I   int
	Sum uint32
}

// Check reads each chunk of want from f, a data file of size bytes in
// chunks of chunk bytes, and compares its CRC-32C with the recorded one.
// It returns the chunks that failed, in want's order, and why the last of
// them did: a sum that differs, or the file ending inside the chunk, or a
// read error. A chunk not in bad has its recorded sum in the file.
func Check(f *os.File, chunk, size int64, want []Want) (bad []int, why error) {
	if len(want) == 0 {
		return nil, nil
	}
	buf := make([]byte, min(chunk, 1<<20))
	for _, w := range want {
		off, n := durable.ChunkSpan(w.I, chunk, size)
		got, err := durable.ReadChunkSum(f, buf, off, n)
		if err == nil && got != w.Sum {
			err = fmt.Errorf("chunk %d (%d bytes at %d) has CRC32C %08x, its record says %08x", w.I, n, off, got, w.Sum)
		}
		if err != nil {
			bad, why = append(bad, w.I), err
		}
	}
	return bad, why
}

// Touched returns the first and last chunk (of chunk bytes) that n > 0
// bytes at off touch: the chunks a read of them must check first.
func Touched(off, n, chunk int64) (first, last int) {
	return int(off / chunk), int((off + n - 1) / chunk)
}
