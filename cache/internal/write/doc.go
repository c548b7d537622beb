// Package write reads and writes the local copy of one file for a caller
// of the cache: the Handle that Cache.OpenWrite returns. It owns
//
//	the I/O       the handle's reads, writes, truncations, allocations
//	              (fallocate), syncs and its close, on the open data file;
//	              the descriptor handed to the kernel (Fd) (handle.go)
//	the order     of each change against the cache's record of it: room
//	              reserved for the growth first (Cache.Grow), the change
//	              begun (Cache.Begin: journaled when it must be), the
//	              bytes written, the change ended (Cache.End); a change
//	              that does not begin gives its room back (Cache.Unreserve)
//	              (handle.go)
//	the limits    a write cut short at the largest file size, one that
//	              starts there, a truncation or an allocation past it
//	              refused before anything is written; a file the kernel
//	              wrote past the largest object refused at fsync and close
//	              (CheckSize); their error, ErrTooBig (handle.go)
//	syncs         of the handle's file and record (Sync), and of a cache
//	              file no handle writes (SyncFile) (handle.go)
//	the mark      of a hidden open that may write nothing: the cache
//	              file's time set 1 ns back before the kernel has the
//	              descriptor, and whether a stat of the file still shows
//	              it (Mark) (mark.go)
//
// It decides nothing about entries: which entry the handle's file has
// now (a rename moves the handle, a deletion orphans it), what a change
// does to the entry's record and when it is journaled, the charges and
// waiting for room, checking chunks before a read, whether an untouched
// open is undone at its close, and what the last close queues are
// package cache's (cache/writehandle.go, cache/untouched.go), reached
// through the interface Cache, which package cache implements for each
// handle. It sees the open data file and plain values; never an entry,
// the cache's state or a lock of its.
//
// Invariants (the callers' part is said where it is theirs):
//   - Journal before bytes: no byte of a change reaches the file before
//     Cache.Begin has returned nil for it, and every Begin that returned
//     nil is ended once, by End (or, for a hidden handle's one change,
//     by Close: End, or Cache.Untouched undoing it), after the I/O.
//   - Room before growth: a change that may grow the file calls Grow
//     for its end before Begin; if Begin fails, Unreserve, and nothing is
//     written.
//   - Nothing past the limits through the handle: WriteAt, Truncate and
//     Allocate check Cache.MaxFileSize before Grow.
//   - A hidden handle (the kernel writes the file itself, passthrough)
//     has one change, begun by BeginHidden before the handle is handed
//     out and ended by Close, which takes the file's size from the file
//     (Cache.Resize); its mark, if any, is set before that change begins.
//   - One close: Close closes the file, then calls Cache.Close exactly
//     once, whatever happened before.
//
// Lock order: the package has no lock (Close runs once through a
// sync.Once). The methods of Cache take the cache's locks inside (in
// package cache, Cache.mu; Begin and Record journal between their holds
// of it, Grow may wait for room, CheckRead reads the file between them,
// never under it); the package calls them with nothing held and never
// holds a lock of the cache's.
package write
