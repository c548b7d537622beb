// Package send is the bucket side of sending a cached file's content:
// how one version of a file gets into the bucket, and what a parallel
// upload leaves there until it is cleaned up. It owns
//
//	the choice   one request (transfer.Bucket.Put), parts (a
//	             LargeUploader, from LargeThreshold bytes), or a
//	             server-side copy of a pending copy's source (Copy)
//	             (Send, send.go)
//	staging      the staging prefix of each parallel upload: recorded in
//	             the index (Index, BoltIndex: the cache index's staging/
//	             bucket) before its first part leaves, cleaned and
//	             forgotten once the upload ends; the prefixes of the
//	             uploads running now (staging.go)
//	the cleaner  cleaning up the prefixes a crash or a failed cleanup
//	             left in the index: in the background (RunCleaner, at
//	             once at a start and a minute after a round that left
//	             some), and at an unmount (CleanStaging) (staging.go)
//
// It decides nothing about entries: when a name is sent and what it is
// sent from (a data file's ID and size, or a copy's source) are package
// cache's (cache/upload.go); under which conditions and metadata, and
// what each answer means, are package internal/upload's, which calls
// Send; what becomes of the entry then is package cache's again.
// It sees only plain values (names, IDs, sizes, a Source,
// transfer.PutOptions), the bucket, the LargeUploader, the Index, the
// data directory and a logger; never the cache's state.
//
// Invariants (the callers' part is said where it is theirs):
//   - Recorded before sent: a parallel upload's staging prefix is in the
//     index (a synced commit) before any part is sent under it; if it
//     cannot be recorded, nothing is sent. Its record is deleted only
//     after everything under it is cleaned up, so a crash in between
//     leaves the record, and the cleaner of the next start finds it.
//   - A running upload's prefix is its own: while Send runs, its prefix
//     is live, and no cleaning round touches it (the upload cleans up
//     after itself, or, if that fails, leaves it to the next round).
//   - One round at a time: the cleaner and CleanStaging never clean
//     concurrently. A prefix a round cannot clean keeps its record and
//     counts as left: the cleaner tries again a minute later,
//     CleanStaging reports how many are left.
//   - Lifetime: the cleaner runs in a goroutine of the caller's, which
//     ends it (life) and waits for it before it closes the Index; Send
//     and CleanStaging are not called once the Index is closed.
//
// Lock order: the package has two locks. Sender.cleanMu orders cleaning
// rounds and is held across their network requests and index commits;
// it is taken with no other lock held. Sender.mu guards the live
// prefixes: a leaf, taken inside the package only (under cleanMu, or
// nothing), never held across I/O. Send and CleanStaging do network and
// disk I/O: a caller calls them with no lock of its own held (packages
// cache and internal/upload, never under Cache.mu), and the package
// never calls back into its caller.
package send
