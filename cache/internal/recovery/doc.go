// Package recovery checks and mends a cache directory from what is on its
// disk: at a start, before the cache serves anything, and offline, in
// fsck. It owns
//
//	the bucket    the file bucket, which names the cache's bucket and
//	              outlives a lost index.db (CheckBucket) (start.go)
//	a bad index   moving a damaged index.db aside and opening a new one
//	              (OpenIndex, ReplaceIndex), and filling a new one with
//	              the records the data files describe (RebuildRecords)
//	              (start.go)
//	orphans       the data files no record names: scanning data/, and the
//	              plan of what becomes of each (Place, Plan): removed,
//	              adopted as its name's record again, or moved to
//	              lost+found/ with a note; carrying it out (Plan.Settle)
//	              (orphans.go)
//	loading       opening the index and its journal at a start, the
//	              journal replayed and hooked to the describer, the
//	              records read and reconciled with their files, the
//	              orphans placed, undescribed files described (Load,
//	              Loaded), and their order of use (Loaded.ByAccess)
//	              (load.go)
//	fsck          checking an unmounted cache (Fsck, Report): the index,
//	              the journal, the data files against the records, every
//	              copy against its chunk sums (fsck.go, sums.go); whether
//	              a process holds the directory (InUse, IndexPath); with
//	              Options.Rebuild, replacing the index with a rebuilt one;
//	              ShorterOrLonger, a file's size against its record's in
//	              messages, which the cache's own checks share (sums.go)
//
// It decides nothing about a running cache: what the cache does with the
// records Load returns (the entries, their charges, eviction to the cap,
// the uploads of the changes found) and what it counts of a start (the
// copies of the wrong size, Loaded.WrongSize, in its Stats) are package
// cache's (cache/load.go: openState). It sees only a directory,
// plain values (durable.Record, names, IDs, paths), the bbolt handle and
// the journal of the index it opens, the describer of the data files,
// and a logger; never the cache's state. The index and the journal Load
// returns are the caller's from then on.
//
// Invariants (the callers' part is said where it is theirs):
//   - Nothing that may hold bytes not in the bucket is deleted. A data
//     file without a record is removed only if another link of its inode
//     is kept (a rename's hard link), if its description says its bytes
//     are in the bucket (clean, or dropped from the index), or if it holds
//     no bytes at all (or is this cache's temporary file); otherwise it is
//     adopted or moved to lost+found/, never deleted.
//   - Newest wins: of the files whose descriptions claim one name with
//     local state, only the one with the highest ID is adopted (IDs only
//     grow), and only if it is newer than the name's record; the record it
//     unseats, and the other claimants, are settled like files without a
//     record (kept in lost+found/ if they hold local content).
//   - IDs: Plan.MaxID is the highest ID among the files found; no new ID
//     may name one of them. RebuildRecords reserves past it in the new
//     index; at a start the caller advances its journal past it
//     (Journal.AdvancePast) before it makes a new ID.
//   - Order: Plan.Settle runs only after the index holds the plan's
//     adopted records (the caller commits them first), so a crash in
//     between leaves the files in data/ to be placed again.
//   - The same plan: Fsck reports what a start would do (WouldAdopt,
//     WouldRemove, WouldLostFound) with the very rule a start follows
//     (planOrphans), and changes nothing unless asked to rebuild; a
//     rebuild holds the index's lock (bbolt's flock, LOCK_EX) while it
//     moves index.db aside, and leaves the files it could not place to
//     the next start.
//   - One bucket: a directory whose bucket file names another bucket is
//     refused (durable.ErrOtherBucket) before its index is opened.
//   - Records against their files, at a start (reconcile): a record whose
//     data file is missing is dropped (an error in the log if it held
//     changed content: it is lost), but for a pending change that needs
//     no bytes of its own (a deletion, a pending copy, a metadata change),
//     whose file is made again, empty and described (a copy's sized and
//     incomplete), and the change kept: a dropped pending copy would free
//     its source for the deletion that is the other half of its rename;
//     a deletion's file is detached first (a new,
//     empty inode: a renamed file's new name may still share the old
//     one); the file is the truth about local content, so such a record
//     takes its file's size and is complete; a clean copy of the wrong
//     size is cut or grown to its record's size and marked incomplete,
//     with no sums, so that none of it is trusted and it is fetched again.
//     The drops and the adopted records are committed through the journal
//     in one update, before Plan.Settle.
//   - A damaged index found while loading (a record that does not parse
//     counts) is moved aside and rebuilt once; on failure Load leaves
//     nothing open.
//
// Lock order: the package has no lock and starts no goroutine. Its
// functions do disk I/O and run either at a start, before the cache
// serves anything and under no lock of its (in package cache, never under
// Cache.mu), or offline in fsck, on a directory no process holds (InUse;
// the index's flock). The only locks taken are durable's (the journal's,
// then the describer's), inside the methods of the journal and the
// describer that Load calls. In fsck it opens an index and a journal of
// its own, and closes both before it returns; the index that OpenIndex
// returns, or that RebuildRecords fills, and the index and journal that
// Load returns, are the caller's.
package recovery
