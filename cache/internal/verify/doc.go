// Package verify checks cached copies live: the cache directory is not
// trusted blindly.
//
// Every chunk of a cached version has its CRC-32C in the version's record
// (record.Sums), computed as its bytes stream in from the bucket, or as an
// upload reads them. The record also keeps the object's own CRC-32C as
// the bucket reports it (record.CRC32C). What is checked, and when:
//   - a clean copy's file size, at start (load) and at every open;
//   - a clean copy's chunks, once per mount, before the copy is handed to
//     the kernel (FUSE passthrough, which the daemon never sees): a copy of
//     up to SyncMax bytes at its first open, a larger one in the
//     background, while its handles read through the daemon and check each
//     chunk before they serve it;
//   - a whole download, against the object's checksum (transfer.Download);
//   - before an upload, the chunks of a changed file that the application
//     did not write (record.Written) against their sums; the upload then
//     carries the CRC-32C of what it sends, which the bucket checks.
//
// A bad chunk of a clean copy is dropped (no longer present), counted,
// logged, and fetched again; reads of it meanwhile go to the bucket. A bad
// chunk of a changed file is never uploaded and the file is never
// removed: it is held (record.Damaged), answers ErrDamaged (EIO), and is
// named by Status until an operator resolves it (cache.Resolve).
//
// Chunks fetched or summed by this process are trusted for its lifetime
// (the entry's checked chunks): they were checked as they were written.
//
// The package owns the live checks, the flows that read a data file
// between two looks at its entry:
//
//	the chunks   which chunks of a range need a check, from what the
//	             ledger reports of them (plan, a pure rule); the check
//	             itself (integrity.Check); a clean copy's bad chunks
//	             dropped, a changed file's held; a read that touches a
//	             bad chunk refused (Chunks, Read) (check.go)
//	the copy     a clean copy's size at every open, its chunks at its
//	             first open (small) or in the background (large, one copy
//	             at a time, the open waiting up to Wait for it), and a
//	             copy about to be changed checked whole first (Checker:
//	             AtOpen, BeforeWrite) (copy.go)
//	a resolve    taking the bucket's version of a held file: its local
//	             bytes kept in lost+found, then the entry dropped unless
//	             it changed meanwhile, and what the name shows now told
//	             (Checker.TakeBucket) (copy.go)
//	the checked  which chunks of a copy this process checked or
//	             fetched (Checked: a plain set, one per entry, that the
//	             cache keeps under its lock) (checked.go)
//
// Reading a file and comparing its chunks with their sums is package
// integrity, which sees only the file and plain values. What a failure
// means for an entry (dropped chunks, a held file, the counts, the noted
// errors and the log lines of a drop or a hold, the journal), and when a
// chunk counts as checked (settled here, fetched by a download, summed by
// an upload), are package cache's (cache/checksum.go), reached through
// the Ledger, which package cache implements for one entry: one method
// per look at the entry or change of it, each made under the cache's
// lock inside the method. The package sees the data file, plain values
// the Ledger reports (State, Span), and the bucket only to Stat a name;
// never an entry or a lock of the cache's.
//
// Invariants (the callers' part is said where it is theirs):
//   - Nothing unchecked is served: Chunks reports a chunk good only if
//     this process checked or fetched it, it has no sum to check against
//     (a copy from before sums were kept; bytes written here, the truth),
//     or it matched its sum just now. A read that touches another is read
//     from the bucket (a clean copy) or answers ErrDamaged (a held file).
//   - One moment: a check says what the file held while it was read. The
//     flow hands the Ledger back what it saw before the read (Span's
//     Version and Clean); a check of a file written meanwhile settles
//     nothing: no chunk is marked checked, none dropped, nothing held.
//   - A changed file is never dropped here, only held; a clean copy never
//     held, only its bad chunks dropped (fetched again).
//   - Background checks: at most one at a time per Checker (its slot);
//     each holds a reference to its entry from Ledger.StartCheck to
//     Release, and calls EndCheck before its channel is closed and
//     Release after; one stops at the next chunk once Closing is closed,
//     and WG counts it until it has released the entry.
//   - Kept before dropped: TakeBucket drops an entry only after its bytes
//     are in lost+found, and only if the Ledger finds it unchanged since
//     Resolve looked (its version and data file).
//
// Lock order: the package has no lock of its own (the slot is a
// semaphore, taken with no lock held). Its flows read and truncate data
// files and Stat the bucket: a caller calls them with no lock held (in
// package cache, never under Cache.mu). Each Ledger method takes the
// cache's lock itself and releases it before returning; the package
// never holds it and never calls the Ledger under any lock.
package verify
