// Package fs is the FUSE file tree of a mounted bucket, built on go-fuse.
//
// Directories are dirNodes (the root, "dir/" placeholder objects, and
// prefixes that exist only because objects are under them). Files are
// fileNodes, one per object version: a newer generation of a name is a new
// inode, so the kernel never mixes two versions in one page cache or one
// passthrough backing file, and handles open on the old version keep
// reading it.
//
// Names and attributes come from metaCache, which trusts what it learned
// for the metadata TTL (positive and negative lookups, whole listings); the
// kernel's entry and attribute timeouts are set to the same TTL. File data
// comes from the cache package.
//
// Errors from the layers below become errnos in one function, toErrno.
//
// Locks: FS.mu, metaCache.mu and fileNode.mu each guard their own fields;
// no two are ever held at once, and none is held across I/O.
package fs
