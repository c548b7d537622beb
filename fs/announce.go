package fs

import (
	"strings"
	"time"

	"github.com/bucketfs/bucketfs/fs/names"
)

// Announce applies a change of the bucket that its notifications
// announced (cmd/bucketfs wires internal/notify to it): another writer's
// upload, metadata change or deletion of an object. What the mount knows
// of the name changes at once (names.Cache.Announce, by generation), and
// the kernel drops its entry and attributes of the name (nameChanged,
// told by the name cache): the next lookup finds the new version, as a
// new inode, so no open made after this returns the old version's bytes;
// handles open already keep the version they opened. A local change of
// the name not yet uploaded goes down the conflict path at once
// (cache.RemoteChanged). This mount's own uploads, announced too, change
// nothing. It reports what was done, and whether a local change met a
// conflict.
func (f *FS) Announce(an names.Announcement) (names.Outcome, bool) {
	name := an.Object.Name
	if !an.Deleted && an.Full {
		if _, own := f.cache.OwnUpload(name, an.Object); own {
			return names.Duplicate, false // confirmed here already, or about to be
		}
	}
	out := f.names.Announce(an)
	if out != names.Applied || strings.HasSuffix(name, "/") {
		return out, false
	}
	if !an.Deleted && an.Full {
		// A metadata change of a version the kernel has inodes of (open
		// files among them): they show it at their next getattr.
		for _, n := range f.nodesNamed(name) {
			if n.holds(an.Object.Generation) {
				n.setAttrs(an.Object)
				n.NotifyContent(-1, 0) // the kernel's attributes only
			}
		}
	}
	conflict, pinned := f.cache.RemoteChanged(name, an.Object.Generation, an.Deleted)
	if conflict {
		f.log.Info("announced: the object changed in the bucket while it has local changes; they go now, beside it", "object", name, "generation", an.Object.Generation)
	}
	if pinned && !an.Deleted && an.Full {
		if f.prefetch.rewarm(an.Object) {
			f.log.Info("announced: a pinned object changed in the bucket; its new version is fetched in the background", "object", name)
		} else {
			f.log.Info("announced: a pinned object changed in the bucket; the new version is fetched on its next use (bucketfs warm fetches it now)", "object", name)
		}
	}
	return out, conflict
}

// TrustNames says whether the bucket's notifications are live, and since
// when (names.Cache.Trust): while they are, what the mount knows is
// trusted past the metadata TTL.
func (f *FS) TrustNames(live bool, since time.Time) { f.names.Trust(live, since) }
