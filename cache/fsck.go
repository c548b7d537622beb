package cache

import (
	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/recovery"
)

// Checking an unmounted cache directory is package internal/recovery's;
// these are its names for the callers of package cache (cmd/bucketfs).

// FsckOptions configure Fsck.
type FsckOptions = recovery.Options

// FsckReport is what Fsck found (before a rebuild, if one was asked).
type FsckReport = recovery.Report

// ErrCacheInUse means a running bucketfs holds the cache directory.
var ErrCacheInUse = durable.ErrInUse

// IndexPath is the cache index's path in the cache directory dir: the
// file whose lock (bbolt's flock) a process using the directory holds.
func IndexPath(dir string) string { return recovery.IndexPath(dir) }

// InUse reports whether another process holds the cache directory dir:
// a mount, or fsck, holds its index's lock for as long as it uses it.
// It only tries the lock, and gives it back at once; a directory with no
// index is not in use.
func InUse(dir string) (bool, error) { return recovery.InUse(dir) }

// Fsck checks the cache in dir, which no process may be using: the
// index (all of it, bbolt's check included), the journal, and the data
// files against the records. With o.Rebuild it then replaces the index
// with one rebuilt from the data files.
func Fsck(dir string, o FsckOptions) (FsckReport, error) { return recovery.Fsck(dir, o) }
