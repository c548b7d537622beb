package read

import "github.com/bucketfs/bucketfs/cache/internal/readpattern"

// observe notes a read of n bytes at off through h, before it waits for
// them, and acts on what the reads show (readpattern.Decide): the next
// chunk fetched ahead of a reader in order, the whole object once there
// is evidence (Cache.Promote). It reports whether the read continues a
// run in order past its first read: such a reader's waits do not hold
// back the background walk (transfer.Download.EnsureInOrder), which is
// what it reads next.
func (h *Handle) observe(off, n int64) bool {
	chunk := h.chunk
	// How far a read may start from where the last one ended and still
	// count as in order: half a chunk.
	seen := h.evidence.Note(off, n, chunk/2)
	if !h.byEvidence.Load() {
		return seen.Continues(n)
	}
	covered, total := h.dl.Covered()
	switch readpattern.Decide(seen, chunk, covered, total) {
	case readpattern.Whole:
		if h.byEvidence.CompareAndSwap(true, false) {
			h.cache.Promote(h.dl)
		}
	case readpattern.Readahead:
		// The chunk after the one the read ends in.
		h.dl.Readahead((off+n+chunk-1)/chunk*chunk, chunk)
	}
	return seen.Continues(n)
}
