package fs

import (
	"strings"
	"time"

	"github.com/bucketfs/bucketfs/fs/names"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// nameChanged is told by the name cache (names.Cache.OnChange, from its
// own goroutine) that a request to the bucket changed what name is:
// another version, kind or attributes, or a name that came or went. The
// kernel keeps entries and attributes for the metadata TTL; it is told to
// drop those of name, so that its next use is looked up again and sees
// the change (a new version is a new inode). Names the kernel holds no
// directory for need nothing.
func (f *FS) nameChanged(name string) {
	root := f.root.Load()
	if root == nil {
		return
	}
	dir := &root.Inode
	parent, seg := "", name
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		parent, seg = name[:i], name[i+1:]
	}
	if parent != "" {
		for _, s := range strings.Split(parent, "/") {
			if dir = dir.GetChild(s); dir == nil {
				return
			}
		}
	}
	if child := dir.GetChild(seg); child != nil && child.IsDir() {
		child.NotifyContent(-1, 0) // a directory's attributes (its placeholder)
	}
	dir.NotifyEntry(seg)
}

// staleTimeout bounds how long the kernel keeps an answer given past the
// metadata TTL (names.Entry.Stale): its refresh is under way, and tells
// the kernel of a change (nameChanged), but that note may reach the
// kernel before the answer it corrects does.
const staleTimeout = time.Second

// limitStale shortens the kernel's timeouts of out, the answer c, if c
// is stale.
func (f *FS) limitStale(out *fuse.EntryOut, c names.Entry) {
	if !c.Stale {
		return
	}
	d := min(staleTimeout, f.opts.MetadataTTL)
	out.SetEntryTimeout(d)
	out.SetAttrTimeout(d)
}
