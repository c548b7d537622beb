// Package read reads one object version for a caller of the cache: the
// Handle that Cache.Open returns. It owns
//
//	the handle    reading a local copy: as is once it is complete, or
//	              after waiting on its transfer.Download for the chunks a
//	              read touches (Ensure; EnsureInOrder for a reader in
//	              order, so its waits do not hold back the background
//	              walk); the descriptor handed to the kernel (PassthroughFd);
//	              the check at open that the version is still in the bucket
//	              (Check); ErrStale (handle.go)
//	checked reads while the copy is being verified, the chunks each read
//	              touches are checked first (Cache.CheckRange), and the
//	              bytes of a bad one are read from the bucket instead
//	              (handle.go)
//	direct reads  an object too big for the cache, read from the bucket:
//	              its first bytes fetched by Check and kept for the reads
//	              that follow, one request for both (head.go)
//	the evidence  each read of a partial copy noted (readpattern.Reads)
//	              and acted on: the chunk ahead of a reader in order, the
//	              whole object once the reads show it (Cache.Promote)
//	              (observe.go)
//
// It decides nothing about entries: which copy a version has, whether it
// is complete or must be checked, which download fills it, checking
// chunks and what a bad one means (dropped and fetched again, or the file
// held: ErrDamaged), when a copy may be evicted, and the counters are
// package cache's (cache/cache.go's newHandle, cache/handle.go), reached
// through the interface Cache, which package cache implements for each
// handle. It sees the open data file, the download, the bucket's
// ReadRange and the plain values of Params; never an entry, the cache's
// state or a lock of its.
//
// Invariants (the callers' part is said where it is theirs):
//   - No byte is served before it is there: a read of a partial copy waits
//     for its chunks before it reads the file; a read of a copy being
//     verified serves the file only once Cache.CheckRange says so.
//   - The complete, checked copy is the fast path: its reads read the
//     file, count the bytes (Cache.CountRead) and take no lock of this
//     package's and none of the cache's; nothing is allocated for them.
//   - Counting: bytes served from the file are counted by CountRead; bytes
//     the handle fetches from the bucket itself for a read, by
//     CountFetched (transfer.FetchRead); a download's fetches by the
//     download; the head fetched by Check counts as a read's (FetchRead).
//   - ErrStale: an answer of the bucket that the version is gone
//     (transfer.IsStale), met by a read, a wait on the download or Check,
//     is returned wrapped in ErrStale (StaleOr); other errors unchanged.
//   - Ends: a copy complete at open is read until the file's end (writers
//     may change it); other reads stop at the size the handle was opened
//     with.
//   - One hold: a handle with a copy calls Cache.Release exactly once, at
//     its first Close, after it has closed the file; Promote at most once
//     (the first read that shows the evidence). A direct handle calls
//     CountFetched only.
//
// Lock order: the package has two locks, both leaves. Handle.headMu
// guards the direct handle's head, held only to keep or copy it, never
// across I/O. A handle's readpattern.Reads lock is taken inside its Note,
// with nothing else held. A transfer.Download's methods take its own
// lock inside; they are called with no lock of this package held. The
// methods of Cache take the cache's locks inside (in package cache,
// Cache.mu; CheckRange reads the file between its holds of it, never
// under it), and are never called with headMu or the Reads lock held;
// the package never holds a lock of the cache's.
package read
