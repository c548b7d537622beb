// Package space is the space budget of a cache directory: how many bytes
// the cache may hold and how many it holds, how much its disk has free,
// and who waits for room. It owns
//
//	the cap      the most bytes of object data kept (Options.MaxSize),
//	             the sum of the charges against it (Used, Charge), and
//	             the largest file that could ever fit (MaxFileSize: the
//	             cap, the 5 TiB of one GCS object, the disk above its
//	             floor) (budget.go)
//	the disk     its free-space floor (Options.MinFree resolved, 5% of
//	             the disk at most 1 GiB when asked for), its free space as
//	             last measured by statfs, less the growth reserved since
//	             (TryReserve, Reserve) and plus what was evicted since
//	             (Evicted); how short of the floor a growth would take it
//	             (DiskShort); measuring it again (Measure, Refresh)
//	             (disk.go)
//	the waiters  the wake of the writers waiting for room (Wake, Watch,
//	             Unwatch, Waiters), and what a writer that found none is
//	             told: the limits, and the largest files holding the room
//	             as the caller names them (WhyFull, Holder) (room.go)
//	the wait     of one write for room (WaitForRoom): a try before
//	             which the disk is measured, the wake (or, short of the
//	             floor, FreeTTL) waited on between two, a deadline, a last
//	             try whose error ends it; each try is the caller's (Try),
//	             one critical section of its lock (wait.go)
//	pressure     whether changed files fill 9 tenths of the cap, counted
//	             at most every 100 ms (pressure.go)
//
// It decides nothing about entries: what each cached version is charged
// (costOf), which ones are evictable and which go first (the LRU list),
// sending changed files early, and each try of a waiting write (which
// file it has now, evicting for it, reserving its room, the files that
// hold the room) are package cache's (cache/space.go, cache/room.go,
// cache/evict.go). It sees only byte counts, the data directory's path
// for statfs, names and reasons to print, and, in Pressure, a count the
// caller makes; in WaitForRoom, the caller's try.
//
// Invariants (the callers' part is said where it is theirs):
//   - Charges: Used is the sum of what Charge moved; the caller keeps
//     each holder's charge and passes its old value, never a negative
//     one, and makes every charge under one lock of its own (Cache.mu),
//     so the sum is checked there (cache's checkInvariantsLocked).
//   - Wakes: every byte that leaves Used wakes the waiters (Charge lowering
//     a charge), and so does a measure that finds more free space than the
//     last one said; the caller wakes them (Wake) at every other event
//     that may free room. Watch returns the channel to wait on together
//     with whether the growth fits now, at one instant: a wake after it
//     closes that channel, a measure before it is in its answer, so no
//     wake is lost, although Measure runs under no lock of the caller's.
//   - Free space is the last measure, trusted for FreeTTL, less every
//     reservation since and plus every eviction since; a new measure
//     replaces both. Without a floor the disk is never measured and never
//     short: its own ENOSPC is the limit. Before the first measure nothing
//     is short either, and DiskShort says it was not measured.
//   - The floor, the cap and the disk's size are fixed at New.
//   - A wait ends only with a try: done, or failed at the last try after
//     the deadline. Every Watch that counted a waiter is ended by
//     Unwatch before the next try. The caller's try sends the changed
//     files (which wakes) before it watches, under one hold of its lock,
//     so the wake it waits on comes after everything its try saw.
//
// Lock order: the package has one lock, Budget.mu, a leaf: taken inside
// its methods only, never held across I/O or a call out (Measure's statfs,
// Pressure's count and WaitForRoom's tries and waits run without it), so
// it may be taken under a caller's lock (in package cache, under
// Cache.mu; a Wait's methods are called there). Measure does I/O
// (statfs) and WaitForRoom waits: a caller calls them with no lock of its
// own held (never under Cache.mu), as it does the I/O any other decision
// implies.
package space
