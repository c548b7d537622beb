// Package filerename is the flow of a file's rename in the cache, and of
// the exchange of two files' contents (rename(2) with RENAME_EXCHANGE).
// Each is one atomic change of the cache's index, in one journal entry;
// the bucket follows (the records written are package
// internal/renameplan's rules). It owns
//
//	the opens     a rename or exchange opens each file it moves for
//	              writing first, so that its copy is complete (fetched
//	              first, if it was not), syncs it, and takes its size from
//	              the file: writes through passthrough handles still open
//	              count only when they close (Flow.Rename, Flow.Exchange)
//	the shortcut  a file whose content is still a pending copy that
//	              nothing uses moves as it is: nothing is fetched
//	              (Flow.pendingCopy, Ledger.PendingCopy)
//	the order     the new record's ID taken before its entry is visible
//	              (an upload must never see ID 0); the change begun in
//	              the index (targets set aside, new entries published, not
//	              ready); the new cache files, hard links of the old ones;
//	              one journal entry with every record; then the change
//	              applied (the targets replaced) or, if the journal refused
//	              it, undone (the targets restored) and its files removed
//	              (Flow.commit)
//
// It decides nothing about entries: whether a target is ready, what the
// new name is based on, which entry is set aside, the records, the
// handles that follow their file, the charges, the queue and the old
// name's deletion are package cache's (renamefile.go, exchange.go),
// reached through Ledger and Ending, which it implements. It sees names,
// the bucket's attributes, IDs, the cache files' paths and the records
// it is handed to journal; the cache's side of an open handle crosses as
// a type parameter and is never looked into.
//
// Invariants (the cache's part is said on the Ledger's and Ending's
// methods):
//   - Files before records: the journal entry is written only once every
//     cache file it names is made and the journal told (LinkFile); if it
//     is refused, the files made for it are removed.
//   - One end: after a begin that succeeded, exactly one of Ending.Undo
//     (a file could not be made, or the journal refused the entry) or
//     Ending.Apply follows; a rename's old name is detached from its
//     cache file (a file of its own) only after the journal has the
//     rename: for a file, before Apply; for a pending copy, after it.
//
// Lock order: the package has no lock and starts no goroutine. It calls
// the Ledger and the Ending with no lock held, from the caller's
// goroutine; each method takes the cache's lock (Cache.mu) itself, never
// across its I/O. A rename's begin leaves the old name's entry's
// persistMu held (nothing else writes its record until it is marked a
// deletion) until Undo or Apply: between them the flow does only the
// links, the journal write and the detach, and takes no lock.
package filerename
