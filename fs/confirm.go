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

// OnOwnUpload sets fn, told of each version this mount's own upload of
// a name made, once the bucket confirmed it (the notifications expect
// its announcement: internal/notify). nil turns it off.
func (f *FS) OnOwnUpload(fn func(name string, gen int64)) {
	if fn == nil {
		f.ownUpload.Store(nil)
		return
	}
	f.ownUpload.Store(&fn)
}

// confirmed is the function the cache calls (OnConfirmed).
func (f *FS) confirmed(name string, a transfer.ObjectAttrs, deleted bool) {
	f.names.Confirmed(name, a, deleted)
	if deleted || a.Generation <= 0 {
		return
	}
	if from, ok := f.cache.Rebased(name, a); ok {
		for _, n := range f.nodesNamed(name) {
			n.followRebase(from, a)
		}
		return
	}
	base, own := f.cache.OwnUpload(name, a)
	if !own {
		return
	}
	if fn := f.ownUpload.Load(); fn != nil {
		(*fn)(name, a.Generation)
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
		n.fsys.retire(n.ino) // that version, if any, is another file's
	}
}

// followRebase makes a the version the node's content replaces, in place
// of from: the content a rename moved to the node's name replaces the
// version that the name's earlier content's upload made, landed after
// the rename (cache.Rebased). The node's content is the local change: its
// size and time come from the cache until its upload, which adopt then
// gives the node, now that its base matches.
func (n *fileNode) followRebase(from int64, a transfer.ObjectAttrs) {
	n.mu.Lock()
	old := n.attrs
	if n.unlinked || n.name != a.Name || old.Generation != from {
		n.mu.Unlock()
		return
	}
	n.attrs.Generation = a.Generation
	n.mu.Unlock()
	n.fsys.retire(n.ino) // that version is another file's
}

// takeOwn makes a, the name's version that a lookup found the node holds
// (holds: its own, or this cache's upload of its content), the node's
// version. adopt does so when the upload is confirmed, but only for a
// node holding the upload's base; a node whose generation fell behind
// the cache's record (an upload of the content it replaced landed after
// the rename that moved it: package upload's supersededDuring) kept the
// old one, so every open of it found that version gone and answered
// ESTALE, and the kernel's lookup after it found the same node again:
// the second ESTALE reached the application (the model tester, seed
// 1795802702956144187).
func (n *fileNode) takeOwn(a transfer.ObjectAttrs) {
	n.mu.Lock()
	old := n.attrs
	if n.unlinked || n.name != a.Name || old.Generation > a.Generation {
		n.mu.Unlock()
		return
	}
	n.attrs = a
	n.mu.Unlock()
	if old.Generation != a.Generation {
		n.fsys.retire(n.ino) // that version, if any, is another file's
	}
}
