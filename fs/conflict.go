package fs

import (
	"syscall"

	"github.com/bucketfs/bucketfs/internal/testhook"
	"github.com/bucketfs/bucketfs/transfer"
)

// After a write conflict (cache.ConflictFunc) the name shows the bucket's
// version, and the local one is saved beside it. The kernel, though,
// still holds the file's node of the old version (the generation the
// local change was based on, or none for a new file): its dentry, its
// attributes and pages (the local version's), for up to the metadata
// TTL. Once the local copy leaves the name, that node has nothing whole
// to show: its version is gone from the bucket, and its attributes are
// the base's. So the node is marked superseded before the copy leaves
// (conflicted, settled false): from then on, when no local change is
// left, its attributes are the bucket's version's (a lookup that found
// the node while the local change was still there, and fills the
// kernel's entry after it left, never shows the base), and a stat or an
// open by path answers ESTALE, on which the kernel
// looks the name up again, past its caches, and finds the bucket's
// version as a new inode; and once the copy has left (settled true), the
// kernel is told to drop the node's attributes, pages and dentry, so
// that a stat it would answer from its cache asks again too. Every stat
// and read of the path shows the local version until the upload is
// refused, then the bucket's: never the base, never empty.

// conflicted implements cache.ConflictFunc for f's nodes of name.
func (f *FS) conflicted(name string, remote transfer.ObjectAttrs, gone, settled bool) {
	for _, n := range f.nodesNamed(name) {
		if !settled {
			n.supersede(remote, gone)
			continue
		}
		if !n.isSuperseded() {
			continue
		}
		testhook.Pause("fs.conflict-notify") // tests widen the window here
		// Errors are ignored: the kernel may not hold them any more
		// (ENOENT), and a stat or open of the node answers ESTALE anyway.
		n.NotifyContent(0, 0) // attributes and every page
		if seg, parent := n.Parent(); parent != nil {
			parent.NotifyEntry(seg)
		}
	}
}

// supersede marks n as a version the bucket no longer has after a
// conflict (remote is the bucket's version now, or gone), unless n is
// that version or no longer follows the name.
func (n *fileNode) supersede(remote transfer.ObjectAttrs, gone bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.unlinked || !gone && n.attrs.Generation == remote.Generation {
		return
	}
	r := remote
	if gone {
		r = transfer.ObjectAttrs{Name: n.name} // nothing: size 0 until the ESTALE's lookup says ENOENT
	}
	n.replaced = &r
}

func (n *fileNode) isSuperseded() bool { return n.replacedBy() != nil }

// replacedBy returns the bucket's version that replaced n's in a write
// conflict, or nil.
func (n *fileNode) replacedBy() *transfer.ObjectAttrs {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.replaced
}

// staleByPath reports whether a stat or open of n by its path must answer
// ESTALE: n was superseded by a conflict, and no local change of the name
// is left to show (cache.Local).
func (n *fileNode) staleByPath() bool {
	if !n.isSuperseded() {
		return false
	}
	_, local := n.fsys.cache.Local(n.objName())
	return !local
}

// staleErrno is the answer of staleByPath's stat or open: the name is
// looked up again. The kernel tries a path once more after an ESTALE,
// not twice, so that lookup must find the bucket's newest version: the
// version the conflict found (which the name cache holds, in the
// directory's listing) may itself be replaced already, and its node
// would answer ESTALE once more, to the application this time. So the
// name is asked of the bucket again (names.Stale): one metadata request
// per superseded node the kernel still used.
func (n *fileNode) staleErrno() syscall.Errno {
	name := n.objName()
	n.fsys.names.Stale(name)
	n.fsys.log.Debug("a file's node was superseded by a write conflict; the kernel looks the name up again", "object", name)
	return syscall.ESTALE
}
