// Package dirrename is the flow of a directory's rename in the cache.
// An object store has no directories: renaming one renames every object
// under its prefix, in the cache's index at once, in one journal entry,
// and the bucket follows (the records written are package
// internal/renameplan's rules). It owns
//
//	the tries     a rename that finds the directory changed between its
//	              plan and its commit plans again, at most maxTries times,
//	              then gives up (ErrBusy) (Flow.Rename)
//	the sequence  one try: quiesce both prefixes, list the bucket under
//	              each (all pages, in name ranges at once: listAll), the
//	              folder rename if the bucket can make it, else the plan,
//	              its files, its journal entry, and its apply or undo
//	              (Flow.once)
//	the folder    in a bucket with a hierarchical namespace, the store
//	              renames a folder with everything under it in one atomic
//	              step (folders.Folders.Rename): no copies, no deletions,
//	              nothing to resume after a crash. It is tried when the
//	              bucket has objects under the old prefix and none under
//	              the new one, and the cache has nothing to add to them
//	              (Ledger.Freeze). Both prefixes are frozen meanwhile:
//	              opening, writing, removing or renaming a name under them
//	              waits. After it, each cached copy takes its new name if
//	              the object there has the same content (folders.Matched:
//	              the store gives moved objects new generations); a copy
//	              that does not is dropped. If the store's answer is lost,
//	              it is unknown whether the folder moved: the cached copies
//	              under the old prefix are dropped and the rename fails;
//	              what the bucket says is shown from then on. If the new
//	              folder cannot be listed, the copies are dropped and the
//	              rename is done (folder.go in package cache)
//
// It decides nothing about entries: which entries may move with a folder,
// which names move and how (the plan), the cache files of the new
// records, when a plan no longer holds, the journal entry, the new
// entries, the targets set aside, the handles that follow their files
// and the old names' deletions are package cache's (rename.go,
// folder.go), reached through Ledger and Try, which it implements. It
// sees names, the bucket's attributes, the bucket only as a
// transfer.Lister and the folder calls (Folders); the entries cross as a
// type parameter (Ledger.Freeze's checked copies) and inside the Try the
// cache holds, and are never looked into.
//
// Invariants (the cache's part is said on the Ledger's and Try's
// methods):
//   - Quiesced: every step of a try after Ledger.Quiesce runs with both
//     prefixes quiesced (no transfer under them starts, no deletion ends),
//     so the listings agree with the entries the plan reads; Unquiesce
//     comes once, on every path, at the end of the try.
//   - Frozen: a folder rename is asked of the bucket only after
//     Ledger.Freeze said yes, and Thaw comes once after it, after the
//     checked copies are settled (Forget), on every path. After the
//     bucket's call, renamed or failed, no rename by copies is made.
//   - Files before records: Try.Prepare before Try.Build; the journal
//     entry (Try.Write) only after a Build that found the plan holding.
//     A Build that did not ends the try (plan again); after one that
//     did, exactly one of Undo (the journal refused) or Apply follows.
//   - AfterPlan (tests) runs between Prepare and Build, on every try.
//
// Lock order: the package has no lock and starts no goroutine but
// transfer.ListAll's. It calls the Ledger and the Try with no lock held,
// from the caller's goroutine, and never holds anything across them; each
// method takes the cache's lock (Cache.mu) itself, never across its I/O.
// The cache's entries' persistMu may be held from Try.Write to Undo or
// Apply, as the Try says; the flow does no I/O of its own between them.
package dirrename
