package main

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// The memory a mount aims to stay within (--memory-limit). What grows
// with the bucket is what it has seen of names: the kernel's inodes (a
// node here for each, about 1 KiB with go-fuse's) and the names and
// attributes cached in memory (a listing's child is a record of about 90
// bytes and its name; counted at 256 to leave room for names looked up
// alone). Each gets a share
// of the limit; past it, the least recently used go (nodes are forgotten
// by the kernel, names stay in names.db), and a name used again costs a
// lookup from names.db, not a request to the bucket. The rest of the
// limit is for transfers' buffers, the index and the runtime. The Go
// runtime's soft memory limit is set to it, so that the garbage
// collector's headroom does not double the heap past it (a soft limit:
// the runtime may pass it rather than spend all its time collecting).
const (
	nodeBytes     = 1 << 10 // measured: go-fuse's node, this package's node, the index of names
	nameBytes     = 256     // a name and its attributes, at most (see above)
	nodesShare    = 5       // percent of the limit for the kernel's nodes
	namesShare    = 10      // percent for the names and attributes in memory
	minNodes      = 4096
	minNames      = 16384
	defaultMemory = 256 << 20
)

// memoryShares returns the bounds of the kernel's nodes and of the names
// in memory for a limit of limit bytes (0: no bound on either).
func memoryShares(limit int64) (nodes, names int) {
	if limit <= 0 {
		return 0, 0
	}
	nodes = max(int(limit*nodesShare/100/nodeBytes), minNodes)
	names = max(int(limit*namesShare/100/nameBytes), minNames)
	return nodes, names
}

// setMemoryLimit sets the runtime's soft memory limit to limit, unless
// GOMEMLIMIT set one already (an operator's word wins) or limit is 0.
func setMemoryLimit(limit int64, log *slog.Logger) {
	if limit <= 0 {
		return
	}
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		log.Info("GOMEMLIMIT is set: the runtime's soft memory limit is its, not --memory-limit's", "GOMEMLIMIT", v)
		return
	}
	debug.SetMemoryLimit(limit)
}
