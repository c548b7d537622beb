package names

import "strings"

// A stamp is read, under Cache.mu, before the bucket is asked about a
// directory; the answer is kept only if the stamp still holds when it
// comes back (Cache.heldLocked). Otherwise it may predate a change made
// while it was asked, and keeping it would bring back what the change
// dropped, for the TTL and in names.db.
//
// Two things move a stamp on: a change confirmed in the directory
// (Cache.changes, counted per directory), and a subtree forgotten
// (ForgetUnder, DirRenamed) that holds the directory or one of its
// subdirectories' placeholders (Cache.forgets). A listing of d/s/x/
// running while d/s/ is renamed is counted in neither d/s/x/'s changes
// nor anyone's, so the forgotten subtrees need their own log.
type stamp struct {
	changes uint64 // Cache.changes of the directory
	forgets uint64 // forgetLog.seq
	any     bool   // held whatever happens (a last try that must keep its answer)
}

// anyStamp holds always.
var anyStamp = stamp{any: true}

// stampLocked reads dir's stamp.
func (m *Cache) stampLocked(dir string) stamp {
	return stamp{changes: m.changes[dir], forgets: m.forgets.seq}
}

// heldLocked says whether an answer about directory dir asked under s
// may be kept: nothing that moves a stamp happened to dir since s.
func (m *Cache) heldLocked(dir string, s stamp) bool {
	return s.any || m.changes[dir] == s.changes && !m.forgets.since(s.forgets, dir)
}

// forgetUnderLocked drops what is known under prefix, and logs it for
// the answers in flight.
func (m *Cache) forgetUnderLocked(prefix string) {
	m.forgets.note(prefix)
	m.known.dropUnder(prefix)
}

// forgetLogLen is how many forgotten subtrees forgetLog keeps. An answer
// that ran across more is taken as touched by one: it is asked again,
// which costs a request, never a stale answer.
const forgetLogLen = 64

// forgetLog is the log of the newest subtrees forgotten. Guarded by
// Cache.mu.
type forgetLog struct {
	seq    uint64   // subtrees forgotten so far
	recent []string // their prefixes, the newest last; at most forgetLogLen
}

func (f *forgetLog) note(prefix string) {
	f.seq++
	if len(f.recent) == forgetLogLen {
		f.recent = append(f.recent[:0], f.recent[1:]...)
	}
	f.recent = append(f.recent, prefix)
}

// since says whether a subtree forgotten after seq may touch what is
// kept of directory dir: dir itself, or under it, or the placeholder of
// one of its subdirectories (a listing of dir notes those).
func (f *forgetLog) since(seq uint64, dir string) bool {
	n := f.seq - seq
	if n == 0 {
		return false
	}
	if n > uint64(len(f.recent)) {
		return true // older than the log
	}
	for _, p := range f.recent[len(f.recent)-int(n):] {
		if strings.HasPrefix(dir, p) || placeholderGroup(p) == dir {
			return true
		}
	}
	return false
}
