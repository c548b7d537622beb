// Package writeback runs the background work of write-back and the waits
// for it: what moves the cache's changes on, to the bucket and into the
// index, and what waits until they are there. It owns
//
//	the uploader  the loop that waits for the bucket to be online, takes
//	              the names due (Ledger.TakeDue), runs each one's upload
//	              in a goroutine of its own, Parallelism at once, ends
//	              each with Ledger.Done, and sleeps until the next one is
//	              due, a kick (Kick) or pending.Idle (loops.go)
//	the checkpointer  the loop that applies the journal to the index
//	              every durable.CheckpointEvery, its failures logged
//	              without repeating, and counts the hidden writers every
//	              space.HiddenEvery (loops.go)
//	the lifecycle starting both; the uploader's life, which its uploads
//	              and the goroutines started by Go share; stopping the
//	              uploads, then the checkpointer, each waited for, in the
//	              order Close calls them (loops.go)
//	the waits     Flush: every change sent now, its progress, and when it
//	              gives up (every file left is stuck); FlushName: one
//	              name's upload waited for, and the answer while the
//	              bucket is offline (an error, not a hang) (flush.go)
//
// It decides nothing about entries: which names are due, what an upload
// sends and how it is settled, whether a name is dirty, forced, stuck,
// damaged or flushed, and the queue itself (package pending) are package
// cache's (cache/uploader.go, writeback.go), reached through the Ledger,
// which package cache implements: each method that reads or changes the
// cache's state is one critical section of its lock. The entry a
// FlushName waits for crosses as a type parameter (Flushing.Entry) that
// the package hands back and never looks into.
//
// Invariants (the callers' part is said where it is theirs):
//   - A name is in flight once at most: the uploader runs one upload per
//     name TakeDue returns, and calls Done for it exactly once, when that
//     upload ended or was abandoned (Stop came before a slot; Abandon
//     first); the ledger keeps the name in flight until Done (package
//     pending's first invariant).
//   - Wakes: the uploader sleeps after each TakeDue until the next time
//     it returns (pending.Idle when zero), and scans again at once on a
//     Kick: the ledger kicks whenever it must be woken sooner (package
//     pending's Wakes). Kick never blocks: one kick pending stands for
//     any number.
//   - No upload starts while the bucket is offline (Online), and none
//     after StopUploads, which returns only once the uploader, every
//     upload and every goroutine of Go have returned. The checkpointer
//     runs until StopCheckpointer, which Close calls after the uploads
//     and downloads are over, so that their last records are applied.
//   - Flush and FlushName report a name flushed only as the ledger says
//     (Left, Flushed): they add no rule of their own but when to give up
//     (all stuck; ctx; offline).
//
// Lock order: the package has no lock. Every Ledger method is called
// with no lock of the package held, from the uploader, its uploads, the
// checkpointer, or a caller of Flush or FlushName, several at once; each
// takes the cache's lock inside, never across I/O, and never with it
// held by the caller. Kick is called with the cache's lock held: it only
// tries a send on a buffered channel.
package writeback
