package cache

// The state Cache.mu guards, grouped by subsystem, and the invariants
// that tie it together (checkInvariantsLocked).

import (
	"container/list"
	"sync"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// cacheIndex is the index in memory: the cached version of each name and
// the space they use.
type cacheIndex struct {
	entries map[string]*entry // the cached version of each name
	lru     *list.List        // *entry, front = most recently used
	used    int64             // bytes reserved, including dropped entries not yet removed (the sum of entry.charged)
	closed  bool
}

// cacheStatus is what Stats and Status report (status.go).
type cacheStatus struct {
	stats      Stats
	recentErrs []ErrorEvent // see Status
}

// cacheSpace is the free space on the cache's disk (space.go).
type cacheSpace struct {
	free       int64     // free bytes on the disk at freeAt, less the growth reserved since
	freeAt     time.Time // when free was measured; zero: never
	freeing    int64     // bytes of the copies evicted since freeAt
	pressureAt time.Time // when pressureLocked last counted changed bytes
	pressure   bool      // changed bytes were near the cap then
}

// cacheWriteBack is the write-back state: the uploader's queue
// (uploader.go), the local overlay (overlay.go), the open write handles
// (writehandle.go) and the waiting for a change of them (wait.go).
type cacheWriteBack struct {
	queue        map[string]time.Time                                    // dirty names -> when their upload is due
	inFlight     map[string]bool                                         // names with a transfer running (whatever entry)
	nextDue      time.Time                                               // when the uploader wakes by itself
	localIdx     []string                                                // sorted names that may be dirty (see LocalNames)
	changed      chan struct{}                                           // closed and replaced when write-back state changes
	waiters      int                                                     // calls waiting in waitLocked
	waited       chan struct{}                                           // closed and replaced when a call starts waiting there (a test watches it)
	confirmedFn  func(name string, a transfer.ObjectAttrs, deleted bool) // see OnConfirmed
	writeHandles map[*WriteHandle]struct{}                               // every WriteHandle not yet closed
}

// cacheRenames is what directory renames hold (rename.go, folder.go).
type cacheRenames struct {
	holds  map[string]int // name -> pending copies of its bucket version
	quiet  prefixSet      // prefixes whose transfers wait for a directory rename
	frozen prefixSet      // prefixes the bucket is renaming; their names wait (folder.go)
}

// cacheStaging is the state of parallel uploads (staging.go).
type cacheStaging struct {
	liveStaging map[string]bool // staging prefixes of running uploads
}

// cacheMu is Cache.mu.
type cacheMu struct {
	sync.Mutex
}
