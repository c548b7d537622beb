// Package fs is the FUSE file tree of a mounted bucket, built on go-fuse.
//
// Directories are dirNodes (the root, "dir/" placeholder objects, and
// prefixes that exist only because objects are under them). Files are
// fileNodes, one per object version: a newer generation of a name is a new
// inode, so the kernel never mixes two versions in one page cache or one
// passthrough backing file, and handles open on the old version keep
// reading it.
//
// A node belongs to a file, not to a name: FS keeps its own index of the
// file nodes the kernel has, by object name (nodes.go), so that a rename
// moves, and an unlink detaches, the node the kernel uses, whatever
// go-fuse's tree of children says. A file's own upload does not give it a
// new inode while the kernel holds it. Symbolic links are symlinkNodes.
//
// Names and attributes come from the name cache (package fs/names), which
// trusts what it learned for the metadata TTL (positive and negative
// lookups, whole listings), keeps it across mounts, and past the TTL
// answers at once and asks again in the background; the kernel's entry
// and attribute timeouts are set to the same TTL (a second for an answer
// past it). When a refresh finds a change, the name cache says so and
// the kernel is told to drop the name (notify.go). File data comes from
// the cache package. Mode,
// owner, modification time and a link's target live in the object's
// custom metadata (attrs.go), and so do a special file's type and device
// number (special.go: a special file is a fileNode whose inode has that
// type, so the kernel never opens it through bucketfs) and user.*
// extended attributes (xattr.go).
//
// Operations do not stop when the kernel interrupts them (uninterrupted,
// in fs.go): Go programs get signals all the time, and EINTR from mkdir,
// stat or open breaks programs that do not expect it; their waits for the
// bucket are bounded in the layers below.
//
// An open directory is a dirHandle (readdir.go): its names go to the
// reader as the listing decides them, while the rest of a long listing
// is still coming (names.Cache.Stream).
//
// Errors from the layers below become errnos in one function, toErrno.
//
// A directory rename (renameDir) moves everything under the old prefix
// in the cache at once; the nodes follow: the prefixes of the dirNodes
// in go-fuse's tree under the moved one, the names of the file nodes in
// the index, the inode numbers of directories, remembered lookups.
//
// Locks: the rule is written once, in the LOCK ORDER block of fs.go.
package fs
