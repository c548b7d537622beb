// Package cache keeps whole object versions on local disk.
//
// Layout of a cache directory:
//
//	index.db    bbolt: one record per cached object (internal/durable)
//	journal     changes of index.db not yet applied to it (internal/durable)
//	data/ID     one sparse file per cached object version, ID in hex; each
//	            describes its record in an extended attribute (internal/durable)
//	bucket      the bucket's name (outlives a lost index.db)
//	lost+found/ data files a start could not place, with a note each
//	            (internal/recovery)
//	index.db.corrupt-TIME  a damaged index, moved aside (internal/recovery)
//
// Cache.Open returns a Handle for one version of an object (its
// generation). A complete local copy is read as is, and its descriptor can
// be handed to the kernel (FUSE passthrough). A missing or partial copy is
// filled by a transfer.Download that keeps going in the background after
// the handle is closed; a read waits only for the chunks it touches. A
// different generation of the same name replaces the old copy, which is
// removed when its last handle closes.
//
// Cache.OpenWrite returns a WriteHandle: changes land in the local copy
// at once and reach the bucket later (writeback.go has the durability
// contract; internal/upload, what each transfer says to the bucket). A WriteHandle belongs to a file, not a name: a rename moves
// it to the new name's entry, a deletion orphans it (its writes go on in
// its own copy, never uploaded). Cache.SetMeta changes an object's custom
// metadata (meta.go): with the next upload of its content, or alone as a
// conditional metadata patch.
//
// Cache.Exchange swaps the contents of two names (RENAME_EXCHANGE) in
// one journal entry (exchange.go).
//
// Cache.RenameDir renames every object under a prefix in one journal
// entry (rename.go): local changes move with their cache files; the rest
// become pending server-side copies whose sources are held until they
// are made. In a bucket with a hierarchical namespace, a directory with no
// local changes is renamed by the bucket itself, atomically (folder.go).
//
// Space: every cached version counts with its full size against
// Options.MaxSize from the moment it is admitted, so the cache never
// exceeds the cap; the least recently used versions that no handle holds
// are evicted to make room, and to keep Options.MinFree free on the disk.
// A version that cannot fit is read from the bucket directly, uncached.
// A pinned copy (Warm with Pin, warm.go) is never evicted until Unpin.
// The exception is a pending copy not cached (costOf): it counts
// nothing until it is made or written. Writes reserve their growth before
// they write, no file grows past MaxFileSize (ErrTooBig), and changed
// files near the cap are sent at once (space.go).
//
// Crash safety: every change of a record is appended to the journal
// before it takes effect (one write, no sync: it outlives the process);
// the journal is synced by WriteHandle.Sync and applied to bbolt every
// second, each time after data/ itself is synced if a data file was made
// since (durable.Journal.MadeFile), so that no durable record names a
// file whose name a power loss can take. A chunk is recorded as present
// only after its file has been synced, so the index never claims bytes
// the disk does not have. On
// open, the journal is replayed, records without a file are dropped (a
// pending change that needs no bytes of its own gets its file again), and
// files without a record are placed by their own descriptions
// (internal/recovery): never deleted while they may hold bytes that are
// not in the bucket. A missing or damaged index.db is rebuilt the same
// way (internal/recovery); Fsck checks an unmounted cache.
//
// Integrity: the cache directory is not trusted blindly (checksum.go,
// internal/integrity).
// Every record keeps the CRC-32C of each chunk of its copy and the
// object's own; copies are checked before they are served or handed to
// the kernel, changed files before they are uploaded, and uploads carry
// their checksum. A bad clean chunk is fetched again; a changed file with
// damage is held (ErrDamaged) until Resolve.
//
// Lock order and the rule about I/O under locks are written at the top of
// cache.go; the state Cache.mu guards, grouped by subsystem, and its
// invariants in state.go.
//
// Files, by subsystem (each names the package it drives, if any):
//
//	cache.go        Cache, Open, acquiring entries, downloads, Stats, Close
//	entry.go        entry (its fields by subsystem), persisting its record
//	state.go        Cache's guarded state by subsystem; invariants
//	wait.go         waiting for a change under Cache.mu (notifyLocked, waitLocked)
//	load.go         a start: the records internal/recovery loaded (Load)
//	                made entries, re-queued, evicted to the cap (StateError)
//	record.go       record, an alias of durable.Record
//	fsck.go         Fsck, InUse, IndexPath: wrappers of internal/recovery
//
//	evict.go        making room: eviction, dropping and removing entries
//	space.go        the limits; charging entries (costOf), growth, hidden writers
//	room.go         waiting for room (makeRoomToGrow), why none came
//
//	handle.go       Handle, an alias of read.Handle; handleCache, what a
//	                handle asks of the cache (read.Cache)
//	fetch.go        what a download fetches: whole or as read (promote)
//	prefetch.go     Prefetch: small objects fetched before they are opened
//	warm.go         Warm, WarmVersion: wrappers of internal/warm and what it
//	                fills (warmTarget); pins, Unpin
//	checksum.go     integrity: which chunks are checked, held files, Resolve
//
//	writeback.go    the durability contract; Remove, Flush, FlushName
//	writehandle.go  WriteHandle: OpenWrite, changes (begin, end), Close
//	untouched.go    an open for writing that writes nothing (passthrough)
//	uploader.go     what each queued name waits for, the uploader's loop
//	                (schedule, kick, takeDue; the queue: internal/pending)
//	upload.go       an upload's snapshot (takeUpload) and its settling (uploadDone,
//	                settleLocked, deleteDone), failures and their retries
//	uploadledger.go the entries' side of an upload's conversation (upload.Ledger)
//	send.go         the Sender (internal/send): making it, running its cleaner; CleanStaging
//	refusal.go      uploads the bucket refuses: held, or named loudly
//	offline.go      uploads while the bucket is away
//	conflictcopy.go settling a conflict copy (conflictDone)
//	conflictnote.go OnConflict, and what the file system asks about conflicts
//	ownupload.go    this cache's own versions, as the file system asks (OwnUpload, Rebased)
//	announce.go     RemoteChanged: another writer's change, as notifications tell it
//	overlay.go      the local overlay listings read (Local, LocalNames, LocalSubdirs, Settled)
//	meta.go         custom metadata, SetMeta, and settling its patch (patchDone)
//	metapatch.go    PatchMeta: a metadata change sent at once
//	status.go       Status: the snapshot gathered from the entries (types: internal/report)
//
//	renamefile.go   renaming one file (Rename)
//	rename.go       renaming a directory (RenameDir), holds on copy sources
//	folder.go       folder renames in a hierarchical namespace (internal/folders)
//	exchange.go     swapping two names (Exchange)
//	madecopies.go   why copies just made are remembered (holds.MadeCopies)
//
// The durable record (the index's bbolt schema, the journal, the Record
// and its encodings, the data files' descriptions) is package
// internal/durable: this package decides which records exist and when
// they change; durable keeps them, in order, on disk.
//
// The space budget (the cap and the sum of the charges, the disk's floor
// and free space, the wake of writers waiting for room, the pressure of
// changed files) is package internal/space: this package decides what
// each entry is charged and which entries go to make room; space keeps
// the numbers, under its own lock.
//
// Checking and mending a cache directory from its disk (the bucket
// file, a damaged index moved aside and rebuilt, a start's loading of
// the index: the journal replayed, records reconciled with their files,
// data files no record names placed or moved to lost+found; Fsck) is
// package internal/recovery: this package takes the records
// recovery.Load returns, with the index and journal it opened, counts
// the copies it found of the wrong size, and makes the entries; recovery
// needs none of the cache's state.
//
// What bucketfs writes on the objects it uploads (the modification time
// and upload ID keys, the metadata an upload carries and a new version
// keeps, the names of conflict copies) is package internal/objmeta, pure
// functions of plain values.
//
// How a handle's reads decide what its download fetches (the chunk
// ahead of a reader in order, the whole object once the reads show it
// will be read broadly) is package internal/readpattern: the evidence of
// one handle's reads under a leaf lock, and the rule as a pure function;
// package internal/read acts on it, and this package starts the whole
// fetch (fetch.go's promote).
//
// The records a rename writes (the generation the new name's record is
// based on, the deletion the old name becomes; for a directory renamed
// by copies, which names move, which keep their bytes and which become
// pending copies, and what an old entry's deletion keeps of what changed
// meanwhile) are package internal/renameplan, pure functions of records
// and the bucket's attributes; which entries exist, the files, the
// journal entry and the handles that follow stay here (rename.go,
// renamefile.go, exchange.go).
//
// The calls to a bucket's hierarchical namespace (a folder renamed in
// one step, which objects moved with their content, empty folders
// deleted, and whether the bucket has folders at all) are package
// internal/folders; whether a directory rename may use them, and the
// freezing of its names meanwhile, stay here (folder.go).
//
// Sending a file's content to the bucket (one request, parts, or a
// server-side copy of a pending copy's source) and the staging prefixes
// of parallel uploads (recorded in the index before the first part
// leaves, cleaned up after, and by a background cleaner after a crash
// or a failed cleanup; CleanStaging at an unmount) are package
// internal/send: this package decides when a name is sent, from what
// and under which conditions, and settles the entry once the bucket
// answers; send needs none of the cache's state, and keeps the prefixes
// of the uploads running now under its own lock.
//
// Reading a data file and checking its bytes against its chunk sums
// (the chunks a read touches, a range of chunks checked, a changed file
// summed and checked before its upload, the sums the upload carries) is
// package internal/integrity: this package decides which chunks need a
// check and what a failure means for an entry (dropped and fetched
// again, or held until Resolve); integrity sees only a file and plain
// values, and has no lock.
//
// Filling the cache under prefixes ahead of their reads ('bucketfs warm':
// listing the objects, checking that they fit beside the copies that
// cannot be evicted, fetching them some at a time with few opens at once,
// the progress and the report) is package internal/warm: this package
// says which copies are complete and what cannot be evicted, and fills
// and pins one version at a time (warmTarget, behind warm.Cache); warm
// holds no lock of this package's, and the names callers use (Warm,
// WarmVersion, WarmOptions, WarmReport, NoRoomError) stay here as
// wrappers and aliases.
//
// What the cache tells its operator (the Stats and Status snapshot types,
// the order of their lists, the ring of the most recent failures, and the
// limiter of a warning that repeats on every tick) is package
// internal/report: this package decides which entries a snapshot lists,
// what it counts and which failures are noted; report keeps the types and
// the ring, which Cache.mu guards like a map.
//
// What is waiting to reach the bucket (the uploader's queue: the dirty
// names and when each is due, the names with a transfer running, when
// the uploader wakes by itself, and the scan that takes the due names;
// and the local overlay's index: the sorted names that may be dirty and
// their directories, with the queries by prefix listings make) is
// package internal/pending: plain data structures this package keeps
// under Cache.mu; whether a name is dirty, deleted, held, open for
// writing or waiting for a rename is decided here, per name.
//
// What renames hold back (the bucket versions pending copies read,
// counted by name; the prefixes of directory renames under way, quiet
// or frozen; the copies just made and dropped, remembered a short while)
// is package internal/holds: plain data structures this package keeps
// under Cache.mu; which entry holds what, and when, is decided here.
//
// The conversation of one transfer with the bucket (what an upload,
// deletion or metadata patch sends, under which conditions and
// metadata, the entry's own unconfirmed tries told from another
// writer's versions, conflict copies, a copy whose source is gone, and
// the backoff of failed tries) is package internal/upload: this package
// takes the snapshot it sends (takeUpload), and makes every change of
// the entry its answers call for through upload.Ledger (uploadLedger),
// one critical section of Cache.mu per method; upload holds no lock and
// never sees an entry (the Job names it by a type parameter).
//
// Reading one object version (the Handle: a local copy read as is, or
// after its download has the chunks a read touches; the chunks of a copy
// being verified checked before they are served, a bad one's bytes read
// from the bucket; an object too big for the cache read from the bucket,
// its first bytes fetched by the check; the reads noted and acted on: the
// chunk ahead, a whole fetch) is package internal/read: this package
// decides which copy a handle reads, whether it is complete or being
// verified and which download fills it (newHandle), and answers the
// handle through read.Cache (handleCache: the chunk checks and what a bad
// one means, the whole fetch, the release, the counts); read holds no
// lock of this package's, and Handle and ErrStale stay here as aliases.
package cache
