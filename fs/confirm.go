package fs

import "github.com/bucketfs/bucketfs/transfer"

// The cache tells the file system of every version it confirms in the
// bucket (cache.OnConfirmed). The name cache learns it; so do the file
// nodes the kernel holds for the name, when the version is this cache's
// own upload of their content: a node made by create, or moved by a
// rename (whose generation is 0, or the replaced file's), then holds the
// version it wrote. Without that, once the cache dropped or evicted its
// copy, the node's next change (a write, a chown) was based on a version
// that is not the one in the bucket: a conflict copy of the mount's own
// file, or a metadata patch refused for ever (issue 17, item 6, found by
// the model tester's chown-then-rename-dir).

// confirmed is the function the cache calls (OnConfirmed).
func (f *FS) confirmed(name string, a transfer.ObjectAttrs, deleted bool) {
	f.names.Confirmed(name, a, deleted)
	if deleted || a.Generation <= 0 {
		return
	}
	base, own := f.cache.OwnUpload(name, a)
	if !own {
		return
	}
	for _, n := range f.nodesNamed(name) {
		n.adopt(a, base)
	}
}

// adopt makes a, this cache's upload of the content under the node's
// name, the version the node holds, if the node is that content: it
// still follows the name, and holds the version the upload replaced
// (base), or none yet (a new file, a file moved by a directory rename).
// A node of an older version, kept by the kernel, stays what it is.
func (n *fileNode) adopt(a transfer.ObjectAttrs, base int64) {
	n.mu.Lock()
	old := n.attrs
	if n.unlinked || n.name != a.Name || (old.Generation > 0 && old.Generation != base) {
		n.mu.Unlock()
		return
	}
	n.attrs = a
	n.mu.Unlock()
	if old.Generation != a.Generation {
		n.fsys.releaseFileIno(old) // that version, if any, is another file's
	}
}
