// Package integrity checks the bytes of a cache data file against the
// CRC-32C sums of its chunks. It owns
//
//	the chunk check  reading chunks of a data file and comparing each
//	                 with the sum its record keeps (Want, Check); which
//	                 chunks a read of a range touches (Touched) (check.go)
//	the upload scan  reading a changed file before its upload: the sum of
//	                 every chunk and of the whole, which the upload
//	                 carries (FileSums, FileSums.Put), and the check of
//	                 the chunks the application did not write against the
//	                 sums of the version they came from (Ref, Scan)
//	                 (scan.go)
//
// It decides nothing about the cache: which chunks need a check, which
// were checked in this process, and what becomes of a chunk or a file
// that fails (dropped and fetched again, or held until Resolve), with the
// counts and the log lines, are packages verify's and cache's
// (cache/internal/verify, cache/checksum.go). It
// sees only an open file, sizes, chunk indexes, sums and the record's
// Written bitmap; never an entry, the cache's state or a lock of its.
// What a sum covers and how it is read again (durable.ChunkSpan,
// durable.ReadChunkSum), and the sums' encoding in a record, are package
// durable's.
//
// Invariants (the callers' part is said where it is theirs):
//   - Reads only: it never writes, truncates or syncs a file, and opens
//     none; the caller opens the file and closes it.
//   - A chunk fails only for what was read of it: a sum that differs, the
//     file ending inside it, a read error (Check); in Scan, a chunk with a
//     recorded sum, not written here, whose bytes differ or lie past the
//     end of the file. A chunk written here (Ref.Written) is never
//     checked: the file is the truth about it.
//   - All or nothing: Scan's sums are OK only if every chunk of the size
//     bytes was read and none failed. A file it cannot read, or ctx
//     ending, gives the zero FileSums and no failure: the file is sent
//     without a checksum, and the upload, reading it too, says why it
//     cannot. FileSums.Put adds nothing for the zero value.
//   - One moment: a check says what the file held while it was read; a
//     write meanwhile may explain a failure, or a pass. The caller
//     compares its own state before and after (package cache: the
//     entry's version, its Written bitmap) and decides.
//
// Lock order: the package has no lock and starts no goroutine. Its
// functions read from disk: a caller calls them with no lock of its own
// held (in package cache, never under Cache.mu), on a file it keeps open
// across the call.
package integrity
