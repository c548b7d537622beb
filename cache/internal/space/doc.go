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
//	             told (WhyFull) (room.go)
//	pressure     whether changed files fill 9 tenths of the cap, counted
//	             at most every 100 ms (pressure.go)
//
// It decides nothing about entries: what each cached version is charged
// (costOf), which ones are evictable and which go first (the LRU list),
// sending changed files early, and the waiting loop of a write
// (makeRoomToGrow, with its deadline) are package cache's (cache/space.go,
// cache/room.go, cache/evict.go). It sees only byte counts, the data
// directory's path for statfs, and, in Pressure, a count the caller makes.
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
//
// Lock order: the package has one lock, Budget.mu, a leaf: taken inside
// its methods only, never held across I/O or a call out (Measure's statfs
// and Pressure's count run without it), so it may be taken under a
// caller's lock (in package cache, under Cache.mu). Measure does I/O
// (statfs): a caller calls it with no lock of its own held (never under
// Cache.mu), as it does the I/O any other decision implies.
package space
