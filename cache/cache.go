package cache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/fetch"
	"github.com/bucketfs/bucketfs/cache/internal/folders"
	"github.com/bucketfs/bucketfs/cache/internal/read"
	"github.com/bucketfs/bucketfs/cache/internal/recovery"
	"github.com/bucketfs/bucketfs/cache/internal/send"
	"github.com/bucketfs/bucketfs/cache/internal/space"
	"github.com/bucketfs/bucketfs/cache/internal/verify"
	"github.com/bucketfs/bucketfs/cache/internal/writeback"
	"github.com/bucketfs/bucketfs/transfer"
	bolt "go.etcd.io/bbolt"
)

// LOCK ORDER: entry.PersistMu, then Cache.mu, then a transfer.Download's
// own lock (taken inside its methods). PersistMu is never taken with
// Cache.mu held; Rename and RenameDir hold the PersistMu of the entries
// they turn into deletions across their journal write (RenameDir several,
// in name order; nothing else holds two). The locks of the durable
// record (package durable: durable.Journal's, then durable.Describer's,
// a leaf) are taken inside its methods, which are called under PersistMu
// or nothing, never under Cache.mu (they write to disk); they never take
// a lock of this package.
// waitLocked (wait.go) releases Cache.mu while it waits. In tests,
// releasing Cache.mu checks the invariants (state.go); the check only
// tries an entry's PersistMu (TryLock), never waits for it.
// The sender's locks (package send: send.Sender's cleanMu, held across
// a cleaning round's network requests, then its mu, a leaf) are taken
// inside its methods, which do network and disk I/O and are called with
// no lock of this package held, never under Cache.mu; they never take a
// lock of this package.
// The upload flow (package upload) has no lock: it runs with no lock of
// this package held, and each of its calls into uploadLedger takes
// Cache.mu itself and releases it before any journal write (PersistMu)
// or removal; none is ever held across the flow's network I/O.
// The other flows (packages fetch, write, verify, writeback, filerename,
// dirrename; space.Budget.WaitForRoom) have no lock of this package's:
// their ledgers take Cache.mu inside, never across I/O; a rename's steps
// leave the PersistMu named above held from its journal write to Apply
// or Undo.
// The warm walk's lock (package warm: its report's) is never held while
// it calls into this package, and never taken under Cache.mu.
// A handle's locks (package read: Handle.headMu, and its
// readpattern.Reads lock, taken inside Reads.Note) are leaves, never held
// while the handle calls into this package (read.Cache: handleCache's
// methods take Cache.mu inside) or a transfer.Download; this package
// never calls a handle's methods with Cache.mu held.
// The space budget's lock (package space: space.Budget's, a leaf) is
// taken inside its methods, under Cache.mu or nothing; it never takes a
// lock of this package. Budget.Measure does a statfs: it is called with
// no lock held, never under Cache.mu.
// No disk or network I/O happens under Cache.mu: decisions are made under
// it, and the I/O they imply runs after it is released, on entries
// already taken out of the index or marked busy.

// Options configure a Cache.
type Options struct {
	Dir         string // cache directory; created if missing
	MaxSize     int64  // bytes of object data kept; > 0
	ChunkSize   int64  // bytes per range request of a download; the unit of presence and checksums
	MinRange    int64  // least bytes per range request of a chunk fetched by several (transfer.DownloadOptions.MinRange); 0: one per chunk
	Parallelism int    // range requests in flight per object download
	// WholeMax: objects up to this size are fetched whole from their
	// first read; larger ones as they are read, and whole once the reads
	// show it (fetch.go). 0: every object whole.
	WholeMax int64
	Logger   *slog.Logger

	// Write-back (see writeback.go).
	WriteBackDelay    time.Duration // wait after the last close before uploading
	UploadParallelism int           // uploads in flight
	// Large, if set, uploads files of LargeThreshold bytes or more in
	// parts (package internal/send).
	Large          LargeUploader
	LargeThreshold int64
	FullWait       time.Duration // how long a write waits for uploads when changes fill the cache (default 30s)
	// MinFree is the free space kept on the cache's disk (space.go): 0
	// for none, negative for 5% of the disk, at most 1 GiB.
	MinFree int64
	// Online, if set, returns a channel that is closed while the bucket
	// is online (transfer.Breaker.Online): no upload starts while it is
	// not (offline.go).
	Online func() <-chan struct{}
}

// ErrStale means the object version a handle reads is gone from the bucket
// (it was overwritten or deleted) before its bytes were cached. It is
// package internal/read's, where handles answer it.
var ErrStale = read.ErrStale

// staleOr is err, marked ErrStale if it says the version read is gone.
func staleOr(err error) error { return read.StaleOr(err) }

// Cache keeps whole object versions in sparse files on local disk, indexed
// in bbolt. It fills them with background downloads and evicts the least
// recently used ones that no handle holds open.
type Cache struct {
	opts    Options
	b       transfer.Bucket
	db      *bolt.DB
	j       *durable.Journal // every change of the objects bucket goes through it
	desc    *durable.Describer
	dataDir string
	log     *slog.Logger
	wg      sync.WaitGroup // download finishers

	loops   *writeback.Loops[*entry] // the uploader and the checkpointer, Flush's waits (internal/writeback)
	closing chan struct{}            // closed when Close starts: background checks stop

	verify *verify.Checker // the live checks of the copies (checksum.go, internal/verify)

	opened    time.Time      // when Open ran
	readBytes atomic.Int64   // Stats.ReadBytes, counted without mu
	fetcher   *fetch.Fetcher // makes the downloads, counts Stats.Fetched (fetch.go, internal/fetch)
	budget    *space.Budget  // the cap, the disk's floor and free space, waiters for room (space.go)

	folders *folders.Folders // the bucket's folder calls, if it has a hierarchical namespace (folder.go)
	sender  *send.Sender     // sends files' content, cleans up staged parts (send.go)

	// mu guards the state below, grouped by subsystem; state.go has the
	// groups and the invariants that tie them together.
	mu cacheMu
	cacheIndex
	cacheStatus
	cacheWriteBack
	cacheRenames
	inv *invariantState // nil but in tests (state.go)
}

// Open opens (creating if needed) the cache in o.Dir for bucket b. It
// checks that the directory is usable, removes data files that no record
// names (left by a crash), and evicts down to o.MaxSize.
func Open(o Options, b transfer.Bucket) (*Cache, error) {
	if o.MaxSize <= 0 {
		return nil, fmt.Errorf("cache max size must be positive, got %d", o.MaxSize)
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = 8 << 20
	}
	if o.Parallelism < 1 {
		o.Parallelism = 1
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &Cache{
		opts: o, b: b, log: o.Logger, opened: time.Now(),
		folders: folders.New(b, o.Logger),
		dataDir: filepath.Join(o.Dir, "data"),
		cacheIndex: cacheIndex{
			entries: map[string]*entry{},
			lru:     list.New(),
		},
		cacheWriteBack: cacheWriteBack{
			waited:       make(chan struct{}),
			changed:      make(chan struct{}),
			writeHandles: map[*writeLedger]struct{}{},
		},
		closing: make(chan struct{}),
	}
	c.verify = verify.New(verify.Checker{
		SyncMax: verify.SyncMax, Wait: verify.Wait, Dir: o.Dir, DataDir: c.dataDir,
		Bucket: b, Log: o.Logger, Closing: c.closing, WG: &c.wg,
	})
	c.fetcher = &fetch.Fetcher{
		Bucket: b, ChunkSize: o.ChunkSize, MinRange: o.MinRange, Parallelism: o.Parallelism, WholeMax: o.WholeMax,
		Priority: transfer.NewPriority(), Log: o.Logger, WG: &c.wg,
	}
	if o.FullWait <= 0 {
		c.opts.FullWait = 30 * time.Second
	}
	if o.UploadParallelism < 1 {
		o.UploadParallelism = 8
		c.opts.UploadParallelism = 8
	}
	c.loops = writeback.New(writebackLedger{c}, c.opts.UploadParallelism, o.Online, o.Logger)
	c.stats.MaxBytes = o.MaxSize
	if invariantCheck != nil {
		c.inv = &invariantState{known: map[*entry]struct{}{}}
		c.mu.check = func() error { return invariantCheck(c) }
	}
	if err := checkWritable(o.Dir, c.dataDir); err != nil {
		return nil, err
	}
	budget, err := space.New(c.dataDir, o.MaxSize, o.MinFree)
	if err != nil {
		return nil, err
	}
	c.budget = budget
	c.budget.Refresh()
	if err := recovery.CheckBucket(o.Dir, b.Name()); err != nil {
		return nil, err
	}
	c.desc = durable.NewDescriber(c.dataDir, c.log)
	if err := c.openState(); err != nil {
		if !errors.Is(err, ErrCacheInUse) && !errors.Is(err, ErrOtherBucket) {
			err = &StateError{Dir: o.Dir, Err: err}
		}
		return nil, err
	}
	c.sender = c.newSender()
	c.loops.Start() // the checkpointer, the uploader
	c.startCleaner()
	return c, nil
}

// checkWritable makes the directories and proves a file can be created.
func checkWritable(dir, dataDir string) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("cache dir %s is not usable: %w", dir, err)
	}
	f, err := os.CreateTemp(dataDir, ".probe-*")
	if err != nil {
		return fmt.Errorf("cache dir %s is not writable: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

func (c *Cache) dataPath(id uint64) string { return durable.DataPath(c.dataDir, id) }

// Open returns a handle for reading the version of the object described
// by a. A complete local copy of that version (or of a later one this
// cache uploaded) is used as is; an older version is dropped (unless the
// local copy has changes not yet uploaded: those always win); a missing
// one is created and its download started.
// An object that cannot fit in the cache is read straight from the bucket.
func (c *Cache) Open(ctx context.Context, a transfer.ObjectAttrs) (*Handle, error) {
	e, err := c.acquire(ctx, a, false)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return c.directHandle(a), nil
	}
	return c.newHandle(e, fetch.WholeWhy(ctx))
}

// acquire finds or creates the entry for version a and takes a reference
// to it. It returns nil (and no error) if the version cannot fit.
//
// With newFile, an entry created here is a new, empty local file: it is
// recorded as changed in the same commit that creates it.
func (c *Cache) acquire(ctx context.Context, a transfer.ObjectAttrs, newFile bool) (*entry, error) {
	e, _, err := c.acquireCreated(ctx, a, newFile)
	return e, err
}

// acquireCreated is acquire that also reports whether it created the
// entry.
func (c *Cache) acquireCreated(ctx context.Context, a transfer.ObjectAttrs, newFile bool) (*entry, bool, error) {
	c.budget.Refresh()
	c.mu.Lock()
	if err := c.waitThawedLocked(ctx, a.Name); err != nil {
		c.mu.Unlock()
		return nil, false, err
	}
	if c.closed {
		c.mu.Unlock()
		return nil, false, errors.New("cache is closed")
	}
	var victims []*entry
	e := c.entries[a.Name]
	pinned := false // a new version of a pinned copy stays pinned (warm.go)
	// GCS generations of one name only grow. A newer one than the copy's
	// is a change made elsewhere: the copy goes. An older one is a caller
	// that has not seen this cache's own upload yet: the copy stays.
	if e != nil && !e.Rec.LocalContent() && !e.Rec.PendingCopy() && e.Writers == 0 && !e.Uploading && a.Generation > e.Rec.Generation {
		if e.Rec.MetaOnly {
			c.log.Warn("an attribute change (mode, owner or times) not yet sent is dropped: the object changed in the bucket since", "object", a.Name)
			e.Rec.Dirty, e.Rec.MetaOnly, e.Dirtying = false, false, nil
		}
		pinned = e.Rec.Pinned
		victims = append(victims, c.dropLocked(e)...)
		e = nil
	}
	created := false
	if e == nil {
		more, ok := c.roomForLocked(ctx, a.Size)
		victims = append(victims, more...)
		if !ok && fetch.Prefetching(ctx) {
			c.mu.Unlock()
			c.removeAll(victims) // an older copy dropped above
			return nil, false, fetch.ErrNoRoom
		}
		if !ok {
			c.stats.Uncached++
			c.mu.Unlock()
			c.removeAll(victims)
			c.log.Info("object does not fit in the cache; reading it from the bucket directly",
				"object", a.Name, "size", a.Size, "cache_max_size", c.opts.MaxSize)
			return nil, false, nil
		}
		rec := record{Generation: a.Generation, Size: a.Size, ChunkSize: c.opts.ChunkSize, CRC32C: a.CRC32C, Encoding: a.ContentEncoding, Pinned: pinned}
		now := time.Now()
		if g := c.madeCopies.Get(a.Name, now); !newFile && g > a.Generation {
			rec.Generation = g // looked up before the copy was made (madecopies.go)
		}
		if newFile {
			rec.Size, rec.Complete, rec.Dirty = 0, true, true
		}
		e = c.publishLocked(a.Name, rec, now)
		e.Fill.Made(ctx) // before any open can find it
		created = true
	} else {
		c.lru.MoveToFront(e.Elem)
		c.stats.PrefetchUsedBytes += e.Fill.Used(ctx, e.Rec.Size) // a prefetched copy's first open
	}
	e.Refs++
	e.Rec.LastAccess = time.Now().UnixNano()
	c.mu.Unlock()
	c.removeAll(victims)

	if created {
		err := c.create(e)
		c.mu.Lock()
		e.Err = err
		close(e.Ready)
		c.mu.Unlock()
	}
	select {
	case <-e.Ready:
	case <-ctx.Done():
		c.release(e)
		return nil, false, ctx.Err()
	}
	if e.Err != nil {
		c.release(e)
		return nil, false, e.Err
	}
	return e, created, nil
}

// create writes e's record and makes its sparse data file
// (durable.Journal.Create).
func (c *Cache) create(e *entry) error {
	// Other goroutines may touch e.Rec under c.mu meanwhile (an Open of the
	// same name sets LastAccess): write a copy, then publish the ID.
	c.mu.Lock()
	rec := e.Rec
	c.mu.Unlock()
	f, err := c.j.Create(c.desc, e.Name, rec, func(id uint64) {
		c.mu.Lock()
		e.Rec.ID = id
		c.mu.Unlock()
	})
	if err != nil {
		c.forget(e)
		return err
	}
	if rec.Dirty {
		// A new file: the OpenWrite that creates it takes the descriptor
		// instead of opening the file again.
		c.mu.Lock()
		e.Spare = f
		c.mu.Unlock()
		return nil
	}
	f.Close()
	return nil
}

// forget takes a failed entry out of the index. Its creation failed, so
// it holds no change (a new file's dirty flag never reached the journal,
// or its file is missing).
func (c *Cache) forget(e *entry) {
	c.mu.Lock()
	e.Rec.Dirty = false
	victims := c.dropLocked(e)
	c.mu.Unlock()
	c.removeAll(victims)
}

// newHandle opens e's file for a new handle and, if e is incomplete,
// makes its download (fetch.go: started at once for why, if whole). e.Refs
// already counts the handle.
func (c *Cache) newHandle(e *entry, why transfer.FetchReason) (*Handle, error) {
	// Read-write: the kernel keeps the first passthrough descriptor of an
	// inode for every later open of it, writers included.
	c.mu.Lock()
	id, gen, size := e.Rec.ID, e.Rec.Generation, e.Rec.Size // writers change rec under mu
	name, encoded := e.Name, e.Rec.Encoding != ""
	c.mu.Unlock()
	f, err := os.OpenFile(c.dataPath(id), os.O_RDWR, 0)
	if err != nil {
		c.release(e)
		return nil, fmt.Errorf("opening cache file: %w", err)
	}
	p := read.Params{
		Cache: &handleCache{c: c, e: e, name: name}, Bucket: c.b, File: f,
		Name: name, Generation: gen, Size: size, ChunkSize: c.opts.ChunkSize,
		Encoded: encoded,
	}
	pending := c.verify.AtOpen(verifyLedger{c, e}, f)
	c.mu.Lock()
	if why := e.Rec.Damaged; why != "" {
		c.mu.Unlock()
		f.Close() // as the handle's Close would
		c.release(e)
		return nil, fmt.Errorf("%s: %w: %s", e.Name, ErrDamaged, why)
	}
	if e.Rec.Complete || e.Rec.LocalContent() || e.Fill.Complete() {
		c.stats.Hits++
		p.Complete = true
		p.Verify = pending
		c.mu.Unlock()
		return read.New(p), nil
	}
	c.stats.Misses++
	dl, err := c.downloadLocked(e, why, c.fetcher.Whole(why, size))
	if err != nil {
		c.mu.Unlock()
		f.Close()
		c.release(e)
		return nil, err
	}
	p.Download, p.ByEvidence = dl, !dl.Started()
	c.mu.Unlock()
	return read.New(p), nil
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// release drops one handle's reference to e.
func (c *Cache) release(e *entry) {
	c.budget.Refresh()
	c.mu.Lock()
	e.Refs--
	var victims []*entry
	var dl *transfer.Download
	var f *os.File
	if e.Refs == 0 {
		c.budget.Wake() // evictable now, or removed below
		switch {
		case e.Dropped:
			victims = []*entry{e}
		case e.Fill.Idle():
			dl, f = c.takeDownloadLocked(e)
		}
		if !e.Dropped {
			more, _ := c.makeRoomLocked(0)
			victims = append(victims, more...)
		}
	}
	c.mu.Unlock()
	if dl != nil {
		c.retire(e, dl, f)
	}
	c.removeAll(victims)
}

// Close stops every download, records what is cached, and closes the
// index. Handles must be closed first; reads on handles still open fail.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.closing)
	c.mu.Unlock()
	// Uploads still running are cancelled: their files stay dirty, and the
	// next start uploads them. Call Flush first to wait for them.
	c.loops.StopUploads()
	c.mu.Lock()
	type running struct {
		e  *entry
		dl *transfer.Download
		f  *os.File
	}
	var rs []running
	var recs []record
	var names []string
	var spares []*os.File
	for _, e := range c.entries {
		if dl, f := e.Fill.Take(); dl != nil {
			rs = append(rs, running{e, dl, f})
		}
		if e.Spare != nil {
			spares = append(spares, e.Spare)
			e.Spare = nil
		}
	}
	c.mu.Unlock()
	for _, f := range spares {
		f.Close()
	}
	for _, r := range rs {
		c.retire(r.e, r.dl, r.f)
	}
	c.wg.Wait()
	c.mu.Lock()
	for name, e := range c.entries {
		c.notePrefetchWasteLocked(e)
		if isClosed(e.Ready) && e.Err == nil && e.Rec.ID != 0 {
			recs = append(recs, e.Rec)
			names = append(names, name)
		}
	}
	c.mu.Unlock()
	c.loops.StopCheckpointer()
	// Access times, so that the LRU order survives the remount; and the
	// mark of a clean stop (the next start skips the index check).
	err := c.j.Update(func(tx *bolt.Tx) error {
		for i := range recs {
			if err := durable.PutRecord(tx, names[i], &recs[i]); err != nil {
				return err
			}
		}
		return durable.MarkClean(tx)
	})
	if cerr := c.j.Close(); err == nil {
		err = cerr
	}
	if cerr := c.db.Close(); err == nil {
		err = cerr
	}
	return err
}
