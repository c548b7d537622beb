// Package durable is the durable record of a cache directory: what
// survives the process, a crash and a power loss, and its format on disk.
// It owns
//
//	index.db     the bbolt schema: meta/ (version, bucket, clean marker),
//	             objects/ (name -> Record, JSON), staging/ (prefix ->
//	             Staging); opening it safely, checking it, moving a damaged
//	             one aside (index.go, open.go)
//	journal      the write-ahead log of objects/: its entry format, appends,
//	             checkpoints, replay, and the record IDs (journal.go)
//	data/ID      the naming of data files by record ID (DataPath), and the
//	             description each carries of its record in the extended
//	             attribute user.bucketfs.record (describe.go); making
//	             them: a new copy's record and file (Journal.Create), an
//	             empty file, a hard link (files.go)
//	Record       the persisted state of one cached object version, and its
//	             encodings: the chunk bitmaps and chunk sums, and what a
//	             sum covers in the data file (ChunkSpan, ReadChunkSum)
//	             (record.go)
//
// It decides nothing about the cache: which records exist, when they
// change and what they cost are package cache's; what becomes at a start
// of a data file no record names and of a record whose file is gone or
// of the wrong size, and what an offline check finds, are package
// recovery's (cache/internal/recovery). It sees only plain values
// (Record, Op, Description, names, IDs, paths) and the bbolt handle,
// never the cache's state.
//
// Invariants (the callers' part is said where it is theirs):
//   - Journal before effect: a change of objects/ is an Op appended to the
//     journal (one write: it outlives the process) before it takes
//     effect; the caller writes nothing it would need the change for
//     until Append has returned. Journal.Sync makes every change so far
//     survive a power loss. An entry is applied at replay whole or not at
//     all.
//   - Order: changes reach bbolt in the order they were appended: only
//     Journal.Update writes objects/, after applying everything pending
//     (PutRecord and DeleteRecord are for its fn, and for a new index being
//     rebuilt before the journal is opened on it).
//   - Replay: at open, the journal is applied up to its first torn or
//     corrupt entry (what follows was never synced either), in one synced
//     commit, and emptied. An Op with IfID applies only if name's record
//     still names that data file. Apply does the same to records in memory
//     (Journal.Records, fsck).
//   - IDs: a record ID names one data file forever: NewID never hands out
//     an ID in bbolt's sequence, in the journal, or passed to AdvancePast
//     or ReserveIDs (files found on disk).
//   - Presence: a chunk is recorded present (SetPresent) only after its
//     bytes were synced to the data file, so the index never claims bytes
//     the disk does not have; a chunk's sum (SetSums, ChunkSum) holds only
//     for a present chunk not Written since; MarkWritten is recorded before
//     the bytes change.
//   - Files are told: every data file made here (files.go) is told to
//     the journal (MadeFile) once made; a caller that makes one itself
//     tells it too. Create journals a new copy's record before it makes
//     its file, and describes the file before any byte is written to it
//     (so the description never leads the journal, below).
//   - Descriptions follow the journal: a data file's description is
//     written after the journal entry that made it (Journaled, under the
//     journal's lock, in its order), never before, so it can lag the
//     journal but never lead it; a shared inode is described only by the
//     ID that owns it.
//   - Damage in index.db (a panic or memory fault in bbolt) is turned into
//     a *CorruptError by Protect, never a crash.
//
// Lock order: the package has two locks. Journal.mu orders appends and
// checkpoints; under it run only the OnAppend hook (Describer.Journaled,
// which takes Describer.mu) and Update's fn (which must only use its
// transaction). Describer.mu is a leaf. Both are held across disk I/O:
// no method may be called with a caller's state lock held (in package
// cache, never under Cache.mu), and the package never calls back into its
// caller except through OnAppend, Update's fn and Create's journaled
// (called with no lock of the package held).
package durable
