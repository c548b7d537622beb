// Package fetch fills a cache's copies from the bucket: the downloads of
// object versions into their data files, how much of each they fetch,
// and when what they fetched is recorded. It owns
//
//	the fetcher  making a copy's transfer.Download of its missing chunks
//	             (from the version its content is: its own, or a pending
//	             copy's source), with the cache's chunk size, ranges,
//	             parallelism and priority; the rule of what a download
//	             fetches (below); the bytes fetched, counted by why
//	             (Fetcher, fetch.go)
//	the fill     a copy's download and its state: made once, its
//	             background walk started once, taken to be retired, and
//	             whether a prefetch made the copy; what a download fetched,
//	             absorbed into the copy's record (Fill, Absorb, fill.go)
//	the end      a walk's end: the download retired if idle and unheld,
//	             its error logged and noted; retiring: stopped, its file
//	             synced and closed, then recorded (Walk, Retire, Ledger,
//	             end.go)
//	prefetch     fetching a small object whole before it is opened, into
//	             free room only (Prefetch, Prefetcher, prefetch.go)
//
// What a download fetches: a whole object, or what is read. Objects up
// to WholeMax are fetched whole from their first read: small ones cost
// little, and a complete copy is what lets later reads stay local and the
// kernel read the file directly (passthrough). A larger object is
// fetched as it is read: the chunks a read touches (at once, ahead of
// anything in the background: transfer.Priority) and, for a handle
// reading in order, the next chunk ahead of it. It becomes a whole fetch
// once the reads show it will be read broadly: a handle has read a whole
// chunk in order (a copy, a scan, a media player; a quarter of a chunk if
// it began at the start, as whole-file readers do), or a quarter of the
// object's chunks are present. So a reader of a file's footer or index
// (Parquet, ORC, zip, MP4 do that first) fetches a chunk or two, not the
// object (the rules are package readpattern's; a handle acts on them:
// package read, through the cache's promote). 'bucketfs warm' fetches
// whole objects, whatever their size (Warming).
//
// It decides nothing about entries: which entry a copy is, whether it
// holds local changes, what holds it open, the holds on a pending copy's
// source, writing its record to the journal, and dropping it are package
// cache's (cache/fetch.go, cache/prefetch.go), reached through the
// interfaces Ledger and Prefetcher, which package cache implements for
// one entry. It sees the entry's record and checked chunks only as the
// plain values Make and Absorb are handed under the cache's lock.
//
// Invariants (the callers' part is said where it is theirs):
//   - Only synced chunks are ever recorded present: Retire syncs the file
//     before Ledger.Retired records anything, and a failed sync records
//     nothing (the chunks are fetched again). What Absorb puts in a
//     record before that (a download taken) is the process's view, for
//     opens meanwhile; the journal gets it only through Retired.
//   - One download per fill: Make gives a Fill a download only when it
//     has none (the caller checks, under its lock); a download is made
//     only for an incomplete copy with no local changes.
//   - One walk: a download's background walk starts once (Walk), and
//     until it starts the download counts as idle, so the last release
//     retires it. A walk's end retires its download only if it is still
//     the fill's, and no handle holds the copy or it has everything.
//   - Chunks a download fetched and summed count as checked for the
//     process (Absorb); a chunk not present is not checked.
//   - A prefetch never evicts (its Acquire takes free room only) and
//     fetches only a copy it created; a copy it made counts as used the
//     first time an open takes it, as wasted if it leaves before.
//
// Lock order: the package has no lock. Fill is a plain structure its
// owner guards (in package cache, Cache.mu): Make, Walk and Fill's
// methods are called with that lock held and do no I/O but opening the
// data file (Make, so that two opens cannot make two downloads). Walk
// starts a goroutine that, like Retire and Prefetch, runs with no lock
// held; each method of Ledger and Prefetcher takes the cache's lock
// itself, and is never called with it held. A transfer.Download takes
// its own lock inside its methods. The counters are atomic.
package fetch
