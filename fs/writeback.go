package fs

// The FUSE writeback cache (Options.WritebackCache). Without it every
// write(2) is a WRITE request, answered before write(2) returns. With
// it the kernel copies the bytes into the inode's page cache and sends
// them later, in WRITEs of up to max_write, from its writeback (every
// few seconds, under memory pressure), before an fsync(2) is answered
// and before the FLUSH of a close(2). What that changes here (the
// kernel's Documentation/filesystems/fuse-io.rst, and its
// fs/fuse/file.c and inode.c, read for Linux 6.x):
//
//   - The kernel owns the size and modification time of a regular file
//     from its first lookup on: it keeps its own i_size and mtime over
//     every getattr or lookup answer (fuse_get_cache_mask), and tells the
//     file system the times with a SETATTR (FATTR_MTIME, FATTR_CTIME)
//     before the flush of a close and before fsync (fileNode.Setattr
//     keeps them as it keeps utimensat's). So a getattr answer made from
//     the cache's size, which lags behind the dirty pages, cannot shrink
//     a file being written; a new size comes from a truncate (SETATTR)
//     or a new inode (another version of the name, fileNode).
//   - O_APPEND is the kernel's: it places the write at the i_size it
//     owns; the WRITE that reaches the file system carries the offset.
//   - The WRITEs of dirty pages go through any handle open for writing
//     on the inode (the first on the kernel's list), not necessarily the
//     one written through, and partial pages are first read (READ)
//     through a writing handle, O_WRONLY ones included. Every handle of
//     a node writes into one copy (cache.WriteHandle), and writing
//     handles read too (fileHandle.Read), so any handle will do; fsync
//     through a handle that sent no WRITE itself syncs the copy through
//     another writer (fileHandle.syncWriter).
//   - A failed WRITE (no room, the cap, a file past the largest size) is
//     not seen by write(2): the kernel keeps the error on the file's
//     mapping and fsync(2) or close(2) returns it, as a local disk does
//     for an error found at writeback.
//   - The kernel refuses FUSE passthrough on a connection with the
//     writeback cache (it does not set up backing files then; checked on
//     Linux 6.18, 2026-11-27: an O_DIRECT read of a complete copy went to
//     the daemon). So WritebackCache turns Passthrough and
//     PassthroughWrites off (withWriteback): cached reads go through the
//     daemon and the page cache, not straight to the cache file.

import (
	"github.com/bucketfs/bucketfs/cache"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// withWriteback returns o as the mount runs it: passthrough off if the
// writeback cache is on (see above).
func withWriteback(o Options) Options {
	if o.WritebackCache {
		o.Passthrough, o.PassthroughWrites = false, false
	}
	return o
}

// writebackOptions asks the kernel for its writeback cache
// (Options.WritebackCache).
func (f *FS) writebackOptions(mo *fuse.MountOptions) {
	if !f.opts.WritebackCache {
		return
	}
	mo.ExtraCapabilities |= fuse.CAP_WRITEBACK_CACHE
}

// syncWriter returns the WriteHandle an fsync through h syncs: h's own,
// or, if h wrote nothing through the daemon itself (a lazy handle never
// used, a handle open for reading), another writer of the same node.
// With the writeback cache the kernel sends the dirty pages of a file
// through any of its writing handles, and then the fsync through the
// one fsync(2) was called on; without it, a descriptor open for reading
// syncs what others wrote, as on a local disk. nil: nothing is open for
// writing, so nothing was written that is not synced already (a writer's
// close leaves its changes recorded; cache.WriteHandle.Close).
func (h *fileHandle) syncWriter() *cache.WriteHandle {
	w := h.w
	if h.lazy != nil {
		w = h.lazy.opened()
	}
	if w != nil {
		return w
	}
	n := h.node
	n.mu.Lock()
	defer n.mu.Unlock()
	for w = range n.writers {
		return w // they all share one copy
	}
	return nil
}
