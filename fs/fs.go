package fs

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bucketfs/bucketfs/cache"
	"github.com/bucketfs/bucketfs/fs/names"
	"github.com/bucketfs/bucketfs/transfer"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Options describe how the bucket is shown as a file tree.
type Options struct {
	UID, GID    uint32
	FileMode    uint32        // permission bits of files, e.g. 0o644
	DirMode     uint32        // permission bits of directories, e.g. 0o755
	MetadataTTL time.Duration // how long names and attributes are trusted, here and in the kernel
	// MetadataStrict: past the TTL, wait for the bucket instead of
	// answering from what is known and refreshing in the background.
	MetadataStrict bool
	// NamesDir, if set, keeps what is known of names in NamesDir/names.db
	// across mounts (the cache directory), at most MetadataMaxNames
	// names (0: names.DefaultMaxNames).
	NamesDir         string
	MetadataMaxNames int
	// MetadataMemNames bounds the names and attributes held in memory
	// (0: the name cache's default); the rest stay in names.db.
	MetadataMemNames int
	ReadOnly         bool
	NoExec           bool // forbid running programs from the mount
	FsyncRemote      bool // fsync waits until the file is in the bucket
	AllowOther       bool
	// Passthrough lets the kernel read fully cached files directly from the
	// cache file (FUSE passthrough; Linux >= 6.9 and CAP_SYS_ADMIN).
	Passthrough bool
	// PassthroughWrites lets the kernel write fully cached files
	// directly too. Those writes escape the cache's limits (see
	// writeModeLocked); without it writers go through the daemon.
	PassthroughWrites bool
	// WritebackCache lets the kernel keep written pages and send them
	// later, in large WRITEs (FUSE writeback cache; writeback.go).
	WritebackCache bool
	Logger         *slog.Logger
	// Debug logs every FUSE request.
	Debug bool
	// MaxNodes bounds the inodes the kernel holds: past it, the least
	// recently used are asked to be forgotten (reclaim.go). 0: no bound.
	MaxNodes int
	// OpObserver, if set, is told about every FUSE request (see Mount).
	OpObserver OpObserver
	// Prefetch bounds the prefetch of small files (prefetch.go).
	Prefetch PrefetchOptions
}

// LOCK ORDER (the one statement of the rule; doc.go and nodes.go point
// here): FS.mu, FS.nodesMu, dirNode.mu and fileNode.mu each guard their
// own fields and are held only around them: never across I/O (a request
// to the bucket, a call of the cache) nor a call into go-fuse. The one
// nesting: FS.mu is taken under fileNode.mu (repoint retires the node's
// inode number as it changes the node's name, inodes.go); and fileNode.mu under a
// lazy write handle's own lock (lazyWriter.mu, lazywrite.go), which is
// held across the cache's OpenWrite. No other two are held at
// once; nodesMu is a leaf, taken with nothing else held. The lock of the
// name cache (names.Cache) and the cache's locks are taken with none of
// these held. prefetcher.mu (prefetch.go) is a leaf too, never held
// across a call of the cache; so are dirClock.mu (times.go),
// reclaimer.mu (reclaim.go: it looks at a node's locks only after
// releasing its own) and entryGate.mu (gate.go).

// FS is the file tree of one mounted bucket.
type FS struct {
	opts     Options
	bucket   transfer.Bucket
	cache    *cache.Cache
	names    *names.Cache
	root     atomic.Pointer[dirNode] // the root, once Root made it (notify.go)
	log      *slog.Logger
	prefetch *prefetcher
	start    time.Time
	dirTimes dirClock // when this mount last added or removed entries of a directory (times.go)

	ownUpload atomic.Pointer[func(name string, gen int64)] // OnOwnUpload (confirm.go)

	nodesMu sync.Mutex             // a leaf (LOCK ORDER above)
	nodes   map[string][]*fileNode // guarded by nodesMu: object name -> file nodes the kernel has for it (mostly one: a slice, not a set, costs a few bytes a name)

	nextIno atomic.Uint64 // fresh inode numbers (inodes.go)
	clock   reclaimer     // the bound on the kernel's nodes (reclaim.go)

	mu      sync.Mutex
	retired map[uint64]struct{} // guarded by mu: inode numbers not to hand out (inodes.go)
	warned  map[string]struct{} // guarded by mu: names already warned about
}

// New returns the file tree of bucket, reading file data through c.
func New(bucket transfer.Bucket, c *cache.Cache, o Options) *FS {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o = withWriteback(o)
	f := &FS{
		opts: o, bucket: bucket, cache: c, log: o.Logger, start: time.Now(),
		names: names.Open(bucket, c, names.Options{TTL: o.MetadataTTL, Strict: o.MetadataStrict,
			Dir: o.NamesDir, Bucket: bucket.Name(), MaxNames: o.MetadataMaxNames, MemNames: o.MetadataMemNames, Logger: o.Logger}),
		retired: map[uint64]struct{}{},
		nodes:   map[string][]*fileNode{},
		warned:  map[string]struct{}{},
	}
	f.clock.init(o.MaxNodes, o.Logger)
	c.OnConfirmed(f.confirmed) // names, and nodes of this cache's own uploads (confirm.go)
	f.prefetch = newPrefetcher(f, c, o.Prefetch)
	f.names.OnChange(f.nameChanged)
	c.OnConflict(f.conflicted)
	return f
}

// Root returns the root directory node, for gofs.Mount (or use Mount).
func (f *FS) Root() gofs.InodeEmbedder {
	d := &dirNode{fsys: f, pfx: ""}
	f.root.Store(d)
	return d
}

// Close stops the file system's background work and writes what the name
// cache knows to disk: after the file system is unmounted and after the
// cache is closed (so that its last uploads' confirmations reach
// names.db). It stops the prefetches too, if StopPrefetch did not.
// Calling it again does nothing.
func (f *FS) Close() {
	f.clock.stop()
	f.prefetch.stop()
	f.names.Close()
}

// MountOptions returns the go-fuse options matching f's options.
func (f *FS) MountOptions() *gofs.Options {
	ttl := f.opts.MetadataTTL
	mo := fuse.MountOptions{
		FsName:       "bucketfs:" + f.bucket.Name(),
		Name:         "bucketfs",
		AllowOther:   f.opts.AllowOther,
		MaxWrite:     1 << 20,
		MaxReadAhead: 1 << 20,
		// O_DIRECT reads run in parallel only with async DIO. Setuid
		// and setgid are cleared here, not by a getxattr per write
		// (killpriv.go).
		// READDIRPLUS_AUTO: the kernel asks for entries with their
		// attributes (READDIRPLUS, a lookup of each) for a directory's
		// first batch, and for the rest only while the reader stats
		// the entries (ls -l); a walk that only reads names (ls -f,
		// find) gets them without a node per name.
		ExtraCapabilities: fuse.CAP_ASYNC_DIO | fuse.CAP_HANDLE_KILLPRIV_V2 | fuse.CAP_READDIRPLUS_AUTO,
		Options:           []string{"default_permissions"},
		Debug:             f.opts.Debug,
	}
	if f.opts.ReadOnly {
		mo.Options = append(mo.Options, "ro")
	}
	if f.opts.NoExec {
		mo.Options = append(mo.Options, "noexec")
	}
	if !f.opts.Passthrough {
		mo.DisabledCapabilities |= fuse.CAP_PASSTHROUGH
	}
	f.writebackOptions(&mo)
	return &gofs.Options{
		MountOptions:    mo,
		EntryTimeout:    &ttl,
		AttrTimeout:     &ttl,
		NegativeTimeout: &ttl,
		// Modes and owners are filled in from the objects (fillFile,
		// fillDir), --uid and --gid included: go-fuse must not turn
		// mode 0 into 0644 (or 0755), nor owner 0 into --uid.
		NullPermissions: true,
	}
}

// warnOnce logs a warning about name the first time only.
func (f *FS) warnOnce(name, msg string, args ...any) {
	f.mu.Lock()
	_, seen := f.warned[name]
	f.warned[name] = struct{}{}
	f.mu.Unlock()
	if !seen {
		f.log.Warn(msg, append([]any{"object", name}, args...)...)
	}
}

// fillFile sets out to the attributes a of a file with inode number ino.
// Mode, owner and modification time come from the object's metadata
// (attrs.go) where it has them; a symbolic link's size is its target's.
func (f *FS) fillFile(out *fuse.Attr, a transfer.ObjectAttrs, ino uint64) {
	out.Ino = ino
	out.Mode = syscall.S_IFREG | metaUint(a.Metadata, modeKey, 8, f.opts.FileMode)&0o7777
	out.Size = uint64(a.Size)
	if isSymlink(a) {
		out.Mode = syscall.S_IFLNK | 0o777
		out.Size = uint64(len(a.Metadata[symlinkKey]))
	}
	fillSpecial(out, a)
	out.Blocks = (out.Size + 511) / 512
	out.Blksize = 4096
	out.Nlink = 1
	out.Uid = metaUint(a.Metadata, uidKey, 10, f.opts.UID)
	out.Gid = metaUint(a.Metadata, gidKey, 10, f.opts.GID)
	at, t, ct := objectTimes(a)
	if t.IsZero() {
		at, t, ct = f.start, f.start, f.start
	}
	out.SetTimes(&at, &t, &ct)
}

// fillDir sets out to the attributes of directory prefix, whose
// placeholder object is ph (Name "" if it has none): the mode and owner
// kept in its metadata and its time (as for a file), else the flags'
// and the mount's start time. Its link count is 2 and one per
// subdirectory, as on a local disk, where its listing is known; else 1,
// the count of a file system that does not count them (find and fts
// then look at every entry instead of stopping after the count).
func (f *FS) fillDir(out *fuse.Attr, prefix string, ph transfer.ObjectAttrs) {
	md := ph.Metadata
	out.Mode = syscall.S_IFDIR | metaUint(md, modeKey, 8, f.opts.DirMode)&0o7777
	out.Nlink = 1
	if n, ok := f.names.Subdirs(prefix); ok {
		out.Nlink = 2 + uint32(max(n, 0))
	}
	out.Blksize = 4096
	out.Uid = metaUint(md, uidKey, 10, f.opts.UID)
	out.Gid = metaUint(md, gidKey, 10, f.opts.GID)
	at, t, ct := f.start, f.start, f.start
	if ph.Name != "" {
		if pat, pt, pct := objectTimes(ph); !pt.IsZero() {
			at, t, ct = pat, pt, pct
		}
	}
	if et, ok := f.dirTimes.get(prefix); ok {
		// Entries added or removed here since (times.go).
		t = later(t, et)
		ct = later(ct, et)
	}
	out.SetTimes(&at, &t, &ct)
}

// statfs reports a large, mostly free filesystem: a bucket has no fixed
// capacity.
func statfs(out *fuse.StatfsOut) {
	const blocks = 1 << 40 // 4 PiB of 4 KiB blocks
	out.Bsize = 4096
	out.Frsize = 4096
	out.Blocks = blocks
	out.Bfree = blocks
	out.Bavail = blocks
	out.Files = 1 << 30
	out.Ffree = 1 << 30
	out.NameLen = names.MaxNameLen
}

// errno translates an error of the layers below into the errno the
// application sees. It is the only place where that happens.
func (f *FS) errno(ctx context.Context, op, name string, err error) syscall.Errno {
	return toErrno(f.log, op, name, err)
}

// uninterrupted is the context of every FUSE request that may wait for
// the bucket: the kernel's interrupts do not cancel it. The kernel
// interrupts a request when the calling thread gets any signal, also one
// it handles and would restart the call after (SA_RESTART; Go programs
// get SIGURG all the time), and an EINTR answer is not restarted: mkdir,
// stat and open then fail in programs that do not expect it (the POSIX
// suite saw it for mkdir, then for open about once in four runs). A
// fatal signal needs no answer: the kernel stops waiting for it by
// itself. What bounds the wait instead: askContext in fs/names for
// lookups and listings, the stall bound and the circuit breaker
// (transfer) for reads and uploads.
func uninterrupted(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
