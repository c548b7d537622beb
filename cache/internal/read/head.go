package read

import (
	"context"
	"io"

	"github.com/bucketfs/bucketfs/transfer"
)

// HeadSize is how much of an object read straight from the bucket (too
// big for the cache) its open fetches: the check that the version is
// still there and the first read's bytes in one request, instead of a
// 1-byte check and then the read.
const HeadSize = 256 << 10

// readHead fetches the first bytes of the version the uncached handle
// reads, keeping them for the reads that follow: ErrStale if the version
// is gone from the bucket. An open waits for it, as a read would: it is
// a foreground read (background fetches holding every shared slot do
// not hold it back), counted as the reads' fetches are.
func (h *Handle) readHead(ctx context.Context) error {
	n := min(h.size, HeadSize)
	buf := make([]byte, n)
	got, err := h.b.ReadRange(transfer.Foreground(h.readCtx(ctx)), h.name, h.gen, 0, n, &sliceWriter{buf: buf})
	h.cache.CountFetched(transfer.FetchRead, got)
	if err != nil {
		return StaleOr(err)
	}
	if got != n {
		return io.ErrUnexpectedEOF
	}
	h.headMu.Lock()
	h.head = buf
	h.headMu.Unlock()
	return nil
}

// fromHead copies into p what the fetched head holds of the bytes at off,
// and returns how many it copied (0 when the head does not start them).
func (h *Handle) fromHead(p []byte, off int64) int {
	h.headMu.Lock()
	defer h.headMu.Unlock()
	if off >= int64(len(h.head)) {
		return 0
	}
	return copy(p, h.head[off:])
}
