// Package names is the file tree's memory of names and attributes: what
// the bucket said a name is (a file, a directory, nothing), whole
// directory levels, and directories' placeholder objects ("dir/", which
// keep their mode, owner and time), each with when the bucket said it,
// with the changes not yet in the bucket (the cache's local overlay)
// shown over them. A listing answers lookups of its children too, so
// 'ls -l' costs one listing, not one stat per file. TTL 0 disables
// caching.
//
// Within the TTL an answer is trusted. Past it, a known one is given at
// once and asked again in the background (stale-while-revalidate,
// refresh.go), unless Options.Strict; a refresh that finds a change
// notes the name for package fs (OnChange), which has the kernel drop
// its entry. Answers disagreeing for one name are settled by age: the
// most recent answer of the bucket wins (a listing fetched after a
// lookup shows a newer version).
//
// It knows the bucket only through Bucket (List and Stat) and the cache
// only through Overlay. Package fs tells it of the changes it makes
// (Forget, Stale, ForgetUnder, DirMoved, MadeEmpty), and the cache tells
// it of the changes confirmed in the bucket (Confirmed, set with
// cache.OnConfirmed).
//
// Answers and confirmations race: a listing asked for before a change
// reached the bucket may come back after the change left the overlay.
// Three rules keep such an answer from undoing the change:
//   - a listing during which a change under its prefix was confirmed is
//     made again (change counts, List);
//   - a file's confirmed change is kept for a while (recent) and wins over
//     any answer asked for before it;
//   - a placeholder's newer news wins: an answer asked for before a
//     confirmed change of the placeholder never replaces it.
//
// A directory read while it is listed (Stream, stream.go) is the one
// answer given before it is whole: each child as soon as the names met in
// order decide it; the local changes, read before the listing, hold back
// the names they touch until it is whole, and those are then laid over
// by the rules above (withLocal), like any listing.
//
// What was learned is kept in a store (store.go) by directory, a bounded
// working set in memory over CACHE_DIR/names.db (disk.go), which keeps it
// across mounts: a directory is loaded on first use, changes are written
// in batches by one goroutine. The bookkeeping of answers in flight
// (change counts, recent confirmations) stays in Cache and means nothing
// after a restart.
//
// Locks: Cache.mu guards the store, that bookkeeping and the refresher's
// state. It is a leaf but for disk.qmu and layer.mu: never held across a request to
// the bucket, a read of names.db or a call of the Overlay. disk.rw (held
// shared by a load of a directory from names.db, exclusively by the
// writer's commit) is taken before Cache.mu; disk.qmu (the queue of
// changes not yet written) is a leaf, taken under Cache.mu or alone.
// layer.mu (the log of changes that listings share, listing.go) is a
// leaf, taken under Cache.mu, under disk.rw (the writer encoding a
// listing) or alone (a reader of a listing).
package names

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// MaxNameLen is the longest file name the kernel accepts (NAME_MAX).
const MaxNameLen = 255

// Kind is what a name is.
type Kind int

const (
	None Kind = iota // no such name (a negative entry)
	File
	Dir
)

// Entry is what a name in a directory is.
type Entry struct {
	Kind  Kind
	Attrs transfer.ObjectAttrs // for files
	// Stale: answered past the TTL and being asked again in the
	// background (set by Resolve only): worth keeping only briefly.
	Stale bool
}

// WarnFunc reports an object that cannot be shown, once per name.
type WarnFunc func(name, msg string, args ...any)

// Bucket is the part of transfer.Bucket the cache asks.
type Bucket interface {
	Stat(ctx context.Context, name string) (transfer.ObjectAttrs, error)
	List(ctx context.Context, q transfer.ListQuery) (transfer.ListPage, error)
}

// Overlay is the part of the cache the tree needs to show local changes.
type Overlay interface {
	// Local describes name's local copy if it has changes not yet uploaded.
	Local(name string) (transfer.ObjectAttrs, bool)
	// LocalNames lists the names under prefix with such changes: written
	// (present) or deleted (removed).
	LocalNames(prefix string) (present, removed []string)
	// LocalSubdirs lists, by their names in directory prefix, the
	// subdirectories that local changes make or remove, as LocalNames
	// would show them: present, those holding a name written; removed,
	// those holding none whose placeholder was deleted. It must cost
	// little more than the names directly in prefix: a directory's stat
	// calls it.
	LocalSubdirs(prefix string) (present, removed []string)
}

// recentChange is a change of this cache confirmed in the bucket at a
// time: what a file is now (Kind None: deleted), that a directory is
// there now (Kind Dir), or that a directory's placeholder was deleted
// here (dirGone: an rmdir, the old name of a renamed directory).
type recentChange struct {
	Entry
	dirGone bool
	at      time.Time
}

// over is what answer c, which the bucket gave before the change, says
// once corrected by it. A directory of the name wins over a file's
// change (the file stays hidden behind it); a directory whose
// placeholder went here is gone, though objects of other writers under
// it may keep it in the bucket: this mount's next question shows them.
func (rc recentChange) over(c Entry) Entry {
	switch {
	case rc.dirGone && c.Kind == Dir:
		return Entry{Kind: None}
	case rc.dirGone, c.Kind == Dir:
		return c
	}
	return rc.Entry
}

// Cache remembers names and attributes: positive and negative lookups,
// whole directory listings, directories' placeholders. Within the TTL
// they are trusted; past it they are still answered at once and
// refreshed in the background (refresh.go), unless Options.Strict.
type Cache struct {
	b      Bucket
	ttl    time.Duration
	strict bool             // past the TTL, wait for the bucket
	local  Overlay          // changes not yet in the bucket; shown over what it says
	now    func() time.Time // the clock (tests set another)
	log    *slog.Logger

	mu    sync.Mutex
	known store // guarded by mu: what the bucket said
	// changes counts the confirmed changes per prefix; a listing that ran
	// while one came in may predate it, so it is fetched again.
	changes map[string]uint64 // guarded by mu
	// forgets logs the subtrees dropped whole (stamp.go).
	forgets forgetLog // guarded by mu
	// recent holds the names whose changes were confirmed lately, by
	// prefix and name: an answer from the bucket asked for before the
	// confirmation may predate it (a listing or a lookup running while
	// many uploads end, as after a directory rename), so such answers
	// are corrected with these. Kept for recentFor.
	recent      map[string]map[string]recentChange // guarded by mu
	recentSwept time.Time                          // guarded by mu: when old ones were last dropped

	// gone holds the generations whose deletion was announced, by name
	// (announce.go); trustFrom, if not zero, is when announcements
	// became live: answers asked since are trusted past the TTL.
	gone      map[string]int64 // guarded by mu
	trustFrom time.Time        // guarded by mu

	bg        refresher // background refreshes and change notes (refresh.go)
	ahead     ahead     // directories listed ahead of a walk (ahead.go)
	closeOnce sync.Once
}

// Options configure a Cache made by Open.
type Options struct {
	TTL    time.Duration // how long answers are trusted (0: not cached)
	Strict bool          // past the TTL, wait for the bucket instead of answering at once
	// Dir, if set, is the cache directory: what is known is kept in
	// Dir/names.db across mounts, for Bucket.
	Dir    string
	Bucket string
	// MaxNames bounds the names kept in names.db (0: DefaultMaxNames);
	// the least recently used directories go first.
	MaxNames int
	// MemNames bounds the names held in memory (0: 100,000); more stay
	// in names.db, loaded by directory when used (store.go).
	MemNames int
	Logger   *slog.Logger
}

// DefaultMaxNames is the default bound of names kept in names.db.
const DefaultMaxNames = 1_000_000

// New returns a cache of what b says, in memory only, with the local
// changes of local shown over it, trusted for ttl (0: not cached).
func New(b Bucket, local Overlay, ttl time.Duration) *Cache {
	return Open(b, local, Options{TTL: ttl})
}

// Open returns a cache of what b says with the options o. A names.db
// that cannot be used leaves the cache in memory only, with a warning.
// Close it.
func Open(b Bucket, local Overlay, o Options) *Cache {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	m := &Cache{b: b, local: local, ttl: o.TTL, strict: o.Strict, now: time.Now, log: o.Logger, known: newStore(),
		changes: map[string]uint64{}, recent: map[string]map[string]recentChange{}, gone: map[string]int64{}}
	m.bg.init()
	if o.MemNames > 0 {
		m.known.memNames = o.MemNames
	}
	if o.Dir != "" && o.TTL > 0 {
		if o.MaxNames <= 0 {
			o.MaxNames = DefaultMaxNames
		}
		d, err := openDisk(o.Dir, o.Bucket, o.TTL, o.MaxNames, o.Logger)
		if err != nil {
			o.Logger.Warn("names are not remembered across mounts: names.db cannot be opened", "err", err)
		} else {
			m.known.disk = d
		}
	}
	return m
}

// Close stops the background refreshes and writes what is known to
// names.db.
func (m *Cache) Close() {
	m.closeOnce.Do(func() {
		m.bg.close(&m.mu)
		m.known.disk.close()
	})
}

// ensure loads the groups gs from names.db into memory, if they are not
// there. It reads the file: called with no lock held.
func (m *Cache) ensure(gs ...string) {
	d := m.known.disk
	if d == nil {
		return
	}
	for _, g := range gs {
		m.mu.Lock()
		ok := m.known.resident(g)
		m.mu.Unlock()
		if ok {
			continue
		}
		d.rw.RLock()
		gr, err := d.load(g)
		if err != nil {
			d.fail(err)
			gr = &group{prefix: g, entries: map[string]cachedEntry{}, placeholders: map[string]placeholder{}}
		}
		m.mu.Lock()
		if !m.known.resident(g) {
			d.unwritten(gr)
			m.known.insert(gr)
		}
		m.mu.Unlock()
		d.rw.RUnlock()
		d.queue(op{kind: opTouch, key: g})
	}
}

// recentFor is how long confirmed changes are kept in Cache.recent:
// longer than any answer asked for before them is used.
func (m *Cache) recentFor() time.Duration { return 2*m.ttl + time.Minute }

// askTimeout bounds the questions a lookup or a listing asks the bucket.
const askTimeout = time.Minute

// askContext is the context of the bucket requests of a lookup or a
// listing: not cancelled when the kernel interrupts the FUSE request, and
// bounded by askTimeout. The kernel interrupts a request whenever the
// calling thread gets a signal, and Go programs get one often (SIGURG,
// for goroutine preemption): answering EINTR to mkdir or stat then fails
// programs that do not retry it (found by the POSIX suite: a mkdir of a
// deep path failed with EINTR about once in thirty runs). These answers
// are short; a bucket that does not answer fails them with ETIMEDOUT.
func askContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), askTimeout)
}

// parentPrefix returns the listing prefix of the directory holding name.
func parentPrefix(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i+1]
	}
	return ""
}

// ValidName reports whether seg can be a file name on Linux.
func ValidName(seg string) bool {
	return seg != "" && seg != "." && seg != ".." && len(seg) <= MaxNameLen &&
		!strings.ContainsAny(seg, "/\x00")
}
