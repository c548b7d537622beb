// Package warm fills a cache with every object under some prefixes ahead
// of their reads ('bucketfs warm'). It owns
//
//	the set     listing every object of the bucket under the prefixes,
//	            each once however many prefixes name it, directory
//	            placeholders left out; which names are under a prefix
//	            (UnderAny); the order of the fetches: biggest first, by
//	            name where sizes tie, so the long fetches start at once
//	            (list.go)
//	the fit     checking, after the listing and before anything is
//	            fetched, that the set fits under the cap beside the bytes
//	            the cache cannot evict outside it (NoRoomError) (list.go)
//	the walk    fetching the set Options.Parallelism objects at once
//	            (DefaultParallelism), with at most warmOpens of them being
//	            opened at once; one version alone (Warmer.One) (warm.go)
//	the report  the progress, counted as objects end, and the result: the
//	            failures named, at most maxErrors of them, by name; the
//	            JSON of both, which is the control socket's (report.go)
//	the pins    ending the pins under some prefixes ('bucketfs unpin'):
//	            those pinned at one instant, then each; the warning of a
//	            start over its cap because of pins, and its rule (Unpin,
//	            WarnOverCap, pins.go)
//
// It decides nothing about entries: whether a copy is complete, what the
// cache cannot evict and what each copy is charged, opening a version,
// fetching it whole and checking its bytes, and setting or ending one
// pin and recording it are package cache's (cache/warm.go), reached
// through the interfaces Cache and Pins, which package cache implements
// (Pins with its entry as a type parameter, which crosses opaquely). It
// sees object attributes (transfer.ObjectAttrs), names, byte counts, the
// bucket only as a transfer.Lister, and the cache's no-space error as a
// plain value (Warmer.NoSpace), which a NoRoomError matches.
//
// Invariants (the callers' part is said where it is theirs):
//   - Nothing is fetched unless all of the set fits: Cache.Kept is asked
//     once, after the whole listing, and no Complete or Fill runs before
//     the fit is checked. It is a check at one instant, not a
//     reservation: what the cache admits after it is the cache's to
//     evict or refuse, object by object.
//   - Order: objects are started in the order of the set, each only once
//     a slot of Options.Parallelism is free; with one slot, the fetches
//     run one after another in that order.
//   - Bounds: at most Options.Parallelism objects are in the cache's
//     Complete or Fill at once, and at most warmOpens of them in the open
//     of a Fill (until it calls opened: the cache calls it exactly once,
//     on every path, before it waits for any byte).
//   - Counting: every object started is counted once, when it ends: in
//     Files and Bytes, and in one of AlreadyFiles (Complete, or Fill
//     found it complete), Failed, or neither (fetched). A failure is
//     counted, not returned; Errors names at most maxErrors of them, and
//     is sorted by name. Files is less than TotalFiles only if the
//     context ended, and then its error is returned with the report.
//   - Pins: the warm's pin goes to Complete and Fill as it was asked; a
//     Fill that fails leaves no pin (the cache's part: a pinned partial
//     copy would keep its full size from eviction). Unpin asks Pins.Pinned
//     once and then calls Pins.Unpin once for each pin it returned, and
//     no other: a copy pinned after keeps its pin; the count is of the
//     pins found.
//
// Lock order: the package has one lock, the report's mutex in
// Warmer.Warm. Under it the report is counted and the caller's progress
// is called (one call at a time, in the order of the counts); progress
// must not wait for the warm. The methods of Cache and Pins are called
// with no lock of the package held, from as many goroutines as objects are
// fetched at once, and take the cache's own locks inside (in package
// cache, Cache.mu, never across their I/O); the listing runs with no lock
// held. The package never holds a lock of the cache's.
package warm
