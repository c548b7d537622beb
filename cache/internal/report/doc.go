// Package report is what a cache tells its operator: the snapshot types
// that 'bucketfs status', the control socket and the metrics read, the
// ring of the most recent failures, and the limiter that keeps a failure
// repeating on every tick from filling the log. It owns
//
//	the snapshot  Stats (the counters) and Status (Stats with the
//	              write-back: what is dirty and since when, what is held
//	              or refused, the recent failures), the types of their
//	              lists (DirtyFile, HeldFile, RefusedFile, ErrorEvent,
//	              FetchedBytes); what one cached file counts and where it
//	              is listed, from its record and its entry's facts (File,
//	              Status.Add); and the order of those lists
//	              (Status.Order) (status.go)
//	recent errors the last MaxRecentErrors failures the log reported
//	              (RecentErrors: Note, Events), and which errors are not
//	              failures to report at all (IsCancel) (errors.go)
//	repeats       a failure that repeats on every tick logged once, then
//	              once per period with a count, and its recovery once
//	              (RepeatLimit) (repeat.go)
//
// It decides nothing about entries: which files are dirty, held, refused
// or pinned, when a counter moves and which failures are noted are
// package cache's (cache/status.go gathers a Status from the entries
// under Cache.mu, one File each; Stats is its counters). It sees only
// plain values: records (durable.Record), names, sizes, times, errors, a
// logger.
//
// Invariants:
//   - A Status's lists, once ordered, are as its fields say: Dirty oldest
//     change first (ties by name), at most the number asked for; Held and
//     Refused by name; Errors oldest first, at most MaxRecentErrors.
//   - RecentErrors keeps the last MaxRecentErrors events noted, in the
//     order they were noted; Events returns a copy, nil when none was
//     noted, so a snapshot never shares the ring's storage.
//   - RepeatLimit logs the first failure of a run (no failure before it,
//     or a success since the last) at once, then at most one line per
//     period, which counts every failure since the line before; a success
//     after failures logs one line with their total, and ends the run.
//
// Lock order: the package has no lock and starts no goroutine. Its types
// are not safe for concurrent use: their owner guards them. In package
// cache, the RecentErrors ring and the counters (Stats, but for the bytes
// read and fetched: atomics counted without a lock) are guarded by
// Cache.mu like its maps: a failure is noted there in the same critical
// section that moves its counter (if it has one), and Status reads both
// in one snapshot, so an operator never sees a count without its event.
// A RepeatLimit belongs to one goroutine (the checkpointer). Nothing here
// does I/O but the log lines RepeatLimit writes, which its owner calls
// with no lock held.
package report
