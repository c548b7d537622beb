package fs

import (
	"sync"
	"time"

	"github.com/bucketfs/bucketfs/cache"
	"github.com/bucketfs/bucketfs/transfer"
)

// Times.
//
// A file's modification time is kept in its object's metadata
// (cache.MtimeKey, the key gcsfuse reads). Its status-change time
// (ctime) is kept in ctimeKey, which every change of metadata sets
// (chmod, chown, utimes, setxattr and removexattr: each a metadata change
// anyway, so the key costs no request of its own). A write moves the
// modification time, so a file's ctime is the later of the two, except
// while the modification time is one utimes set later than the time of
// the change (a time in the future): that time is no change of the file,
// and ctime is the time of the utimes (futureMtimeKey says which
// modification time that is).
//
// An access time set explicitly (utimes, touch -a, tar, rsync --atimes,
// cp -p) is kept in atimeKey; reads never move it (that would be a
// metadata write to the bucket per read). A file without one shows its
// modification time as its access time.
//
// A rename moves the renamed file's ctime in memory only, while the
// kernel holds its node (fileNode.movedAt): the object is copied with
// its metadata as it is.
//
// A directory keeps the same keys in its placeholder object. An entry
// added or removed through this mount (create, mkdir, mknod, symlink,
// unlink, rmdir, rename) moves the directory's modification and change
// times too, as on a local disk, but only in this mount's memory
// (dirClock): writing the placeholder on every create and unlink would
// cost a request each. That time lasts until the mount ends or the
// directory's times are set (utimes: tar and rsync -a set them after
// filling a directory, and then theirs is the time). docs/design.md,
// limits, says what differs.

// The custom metadata keys of times other than the modification time,
// with cache.MtimeKey's values:
//
//	bucketfs-ctime         the time of the last change of a file's or directory's metadata
//	bucketfs-atime         the access time last set explicitly
//	bucketfs-mtime-future  the modification time utimes last set when it was later than the
//	                       change; while cache.MtimeKey is still that time, ctime is bucketfs-ctime
const (
	ctimeKey       = "bucketfs-ctime"
	atimeKey       = "bucketfs-atime"
	futureMtimeKey = "bucketfs-mtime-future"
)

// withCtime adds to md, a change of metadata, the time of the change;
// and if md sets a modification time later than that, futureMtimeKey.
func withCtime(md map[string]string) map[string]string {
	now := time.Now()
	md[ctimeKey] = cache.FormatMtime(now)
	if mt, ok := cache.ParseMtime(md[cache.MtimeKey]); ok && mt.After(now) {
		md[futureMtimeKey] = md[cache.MtimeKey]
	}
	return md
}

// objectTimes returns the access, modification and change times of
// object version a (zero if it has none: the caller picks a default).
func objectTimes(a transfer.ObjectAttrs) (atime, mtime, ctime time.Time) {
	mtime = cache.ObjectMtime(a)
	ctime = mtime
	if t, ok := cache.ParseMtime(a.Metadata[ctimeKey]); ok {
		if set := a.Metadata[futureMtimeKey]; set != "" && set == a.Metadata[cache.MtimeKey] {
			ctime = t // the modification time was set, in the future, at t
		} else if t.After(ctime) {
			ctime = t
		}
	}
	atime = mtime
	if t, ok := cache.ParseMtime(a.Metadata[atimeKey]); ok {
		atime = t
	}
	return atime, mtime, ctime
}

// dirClockMax bounds the directories dirClock remembers; past it, it
// forgets them all (their times go back to their placeholders').
const dirClockMax = 1 << 16

// dirClock remembers when entries of a directory were last added or
// removed through this mount. Its lock is a leaf (fs.go, LOCK ORDER).
type dirClock struct {
	mu sync.Mutex
	at map[string]time.Time // guarded by mu: directory prefix -> time of the last change of its entries
}

// changed records that the entries of the directories prefixes changed now.
func (c *dirClock) changed(prefixes ...string) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil || len(c.at) >= dirClockMax {
		c.at = map[string]time.Time{}
	}
	for _, p := range prefixes {
		c.at[p] = now
	}
}

// forget drops what is known of directory prefix: its times were set,
// or it was removed or renamed.
func (c *dirClock) forget(prefix string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.at, prefix)
}

// get returns when the entries of directory prefix last changed through
// this mount (false if not since its times were set, or not known).
func (c *dirClock) get(prefix string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.at[prefix]
	return t, ok
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
