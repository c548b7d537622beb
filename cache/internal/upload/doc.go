// Package upload is the conversation of one transfer of a cached name's
// change with the bucket: what is sent, which bucket call carries it,
// under which conditions and metadata, and what each answer means for
// the entry. It owns
//
//	the content  an upload of a changed file or of a pending copy: its
//	             size and time read from the data file, the largest
//	             object refused before any byte, the scan that sums the
//	             file and checks it (integrity.Scan), the upload ID
//	             recorded before the send, the send conditional on the
//	             base generation (send.Sender), a directory placeholder's
//	             refusal taken as done, a copy whose source is gone, and a
//	             refusal: the bucket's version our own unconfirmed try
//	             (sent again on top of it) or another writer's (a
//	             conflict copy) (content.go)
//	own tries    telling the entry's own unconfirmed uploads in the
//	             bucket by the IDs it records: adopted without sending if
//	             they hold exactly what would be sent, else the base of
//	             the next send (own.go)
//	conflicts    saving the local version beside the name under the first
//	             conflict name not taken (objmeta.ConflictName), its ID
//	             and name recorded before each try, a try whose answer was
//	             lost found and confirmed (conflict.go)
//	deletions    the deletion conditional on the base, or on a version of
//	             ours an unconfirmed upload may have put there; a version
//	             gone already is done, one written by another is not
//	             ours to delete; the folders a directory leaves, pruned
//	             (delete.go)
//	patches      a change of metadata alone, conditional on the base; a
//	             base gone or moved on drops it, with a warning (patch.go)
//	the backoff  the waits before a failed upload's next try (Backoff,
//	             PermanentRetry, OfflineRetry) (policy.go)
//
// It decides nothing about entries: the snapshot a transfer sends (Job,
// taken under the caller's lock, the entry marked uploading), whether an
// entry is clean after it, queued again, failed, held or dropped, the
// record and its journal writes, the counters, the noted failures, the
// queue and its scheduling, and the listeners told about confirmations
// and conflicts are package cache's (cache/upload.go, uploadledger.go,
// conflictcopy.go, meta.go, rename.go, refusal.go, checksum.go). It
// reaches them only through the Ledger, which package cache implements:
// one method per state transition of the entry, each made under the
// cache's lock inside the method. It sees plain values (the Job, Tries,
// sums, object attributes, errors), the bucket (transfer.Bucket,
// send.Sender, folders.Folders) and the data file it reads; the Job's
// Entry is a type parameter it hands back and never looks into.
//
// Invariants (the callers' part is said where it is theirs):
//   - One transfer of an entry at a time: the caller runs a Job only for
//     an entry it marked as uploading, and starts no other transfer of
//     the name until Run returns. Every path of Run ends the upload with
//     exactly one ending call of the Ledger (Stop, Requeue, Done,
//     Conflict, SourceGone, Deleted, Patched, or Superseded reporting
//     true); after it come only Uploaded, after Conflict, and the
//     listeners' calls (NoteConflict).
//   - Recorded before sent: the upload ID a send carries (and a conflict
//     copy's name) is in the journal (Ledger.RecordAttempt) before the
//     request; if it cannot be recorded, or the entry was replaced,
//     nothing is sent.
//   - Conditional: content is sent only if the bucket's version is the
//     base (IfGenerationMatch; 0: no object), a conflict copy only as a
//     new object, a patch only on the base, a deletion only of the base
//     or of a version of ours; only a deletion based on "whatever is
//     there" (a base below 0) is not conditional. A version the bucket
//     holds is taken as ours only if it carries an upload ID the entry
//     records, read when the decision is made (Ledger.Tries); another
//     writer's version is never overwritten or deleted: the local
//     version goes beside it.
//   - Nothing dropped here: the flow never marks an entry clean; the
//     Ledger's settling calls compare the entry with the Job's Version
//     and Inflight and send a change made meanwhile again.
//   - Order: every Ledger call comes where the state change it makes came
//     in the conversation, before the bucket calls that follow it (the
//     base moved before the send; a copy made lately forgotten and the
//     deletion confirmed before the folders are pruned); a confirmation
//     (Ledger.Confirm) comes before the settling that takes the change
//     out of the local overlay, so listings never miss the name.
//
// Lock order: the package has no lock and starts no goroutine. Run does
// network and disk I/O: the caller calls it with no lock of its own held
// (in package cache, from an upload's goroutine, never under Cache.mu).
// Each Ledger method takes the caller's lock (Cache.mu) itself and
// releases it before returning, and is called with no lock held; it may
// write the journal (under the entry's persistMu, as package cache's
// lock order has it) and remove data files, but makes no network call.
// Confirm and NoteConflict call the caller's listeners with no lock held.
// The Sender's and Folders' locks are theirs, taken inside their methods.
package upload
