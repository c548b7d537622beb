// Package pending is what is waiting to reach the bucket: the data
// structures of write-back that say which names have changes to send and
// when. It owns
//
//	the queue   the names whose changes are to be sent and when each is
//	            due, the names with a transfer running, and when the
//	            uploader wakes by itself; the rule of scheduling (the
//	            sooner time wins; the uploader is woken only for a time
//	            before the one it wakes at anyway) and the scan that
//	            takes the due names (Queue, queue.go)
//	the names   the index of the local overlay: the sorted names that
//	            may have changes not yet in the bucket, and their
//	            directories; adding a name, dropping those no longer
//	            changed, and the queries by prefix that listings make
//	            (the names under a prefix, a directory's subdirectories)
//	            (Names, names.go); the overlay's rules over them: which
//	            names under a prefix count as present or removed, whether
//	            one under a directory is changed, which subdirectories
//	            changes make or remove (overlay.go)
//
// It decides nothing about entries: whether a name is dirty, deleted,
// held, open for writing, being uploaded or waiting for a rename is
// package cache's, told to the queue's scan by a callback (a Verdict per
// name), to the overlay's queries by another (a Change per name), and
// applied to the names by the caller as it ranges over them (Under,
// Subdirs) or by Prune's callback. It sees only names and times.
//
// Invariants (the callers' part is said where it is theirs):
//   - A name is in flight once at most: TakeDue takes a name only if no
//     transfer of it runs, until the caller calls Done, so the bucket
//     sees a name's changes in order. A name taken leaves the queue; one
//     queued again while its transfer runs waits for it.
//   - Wakes: the uploader sleeps after TakeDue until its next (Idle when
//     zero), and Wakes says until when. TakeDue sets it to the first time
//     a name Ready and not in flight is due, or Idle after now. Schedule
//     lowers it to a sooner time and then, only then, reports that the
//     caller must wake the uploader (which scans again): a name scheduled
//     for later is taken by the wake already set, and a rescan per queued
//     name would cost their square. SendNow does not move it: its
//     caller wakes the uploader.
//   - The names are sorted, none twice; their directories are exactly the
//     prefixes of them that end with '/', each counted by the names it
//     holds (Names.Check). The caller adds every name it makes dirty
//     before it releases its lock (in package cache, the invariant
//     checkInvariantsLocked checks), and a name leaves only through Prune,
//     when the caller's callback says it is no longer changed.
//
// No lock: Queue and Names are plain data structures, like a map, that
// their owner guards (package cache keeps both under Cache.mu, so every
// method is called with it held). The callbacks of TakeDue, Prune and
// the overlay's queries, and the bodies of the ranges over Under,
// Subdirs and RunningNames, run in that caller's hold and must not
// change the structure they read. No method does I/O or blocks.
package pending
