// Package holds keeps what renames hold back, by name and by prefix:
//
//	Counts     the bucket versions that pending copies read: a name
//	           held n times is not changed in the bucket (its deletion
//	           above all) until every copy reading it is made or gone
//	Prefixes   the prefixes of the directory renames under way: those
//	           listing and planning (their transfers wait: quiet), and
//	           those the bucket renames as folders (their names wait:
//	           frozen)
//	MadeCopies the generations of versions the cache made in the bucket
//	           (copies a rename made, uploads) whose entries the index
//	           dropped, remembered for a short while so that a file
//	           renamed over such a name just after is based on that
//	           version, not on a stale lookup (package cache's
//	           madecopies.go has the story)
//
// Invariants: a count or a prefix's count is never 0 or less (it goes
// when its last hold does); a made copy is forgotten after MadeCopyKeep,
// and at most MadeCopiesMax are kept.
//
// These are plain data structures with no lock: their owner guards them
// (package cache keeps them under Cache.mu, and decides who holds what:
// which entry's pending copy or download reads a name, when a rename
// quiesces or freezes its prefixes).
package holds
