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
// The internal packages, each with its own package comment (what it
// owns, its invariants, its locks), and what stays here of each:
//
//	durable     the index's bbolt schema, the journal, the Record and its
//	            encodings, the data files' descriptions; here: which
//	            records exist and when they change
//	space       the cap and the sum of the charges, the disk's floor and
//	            free space, the wake of writers waiting for room, under
//	            its own lock; here: what each entry is charged, which
//	            entries are evicted
//	recovery    a start's loading, a damaged index rebuilt, files no
//	            record names placed or moved to lost+found, Fsck; needs
//	            none of the cache's state; here: the entries made from
//	            what Load returns
//	integrity   a data file read against its chunk sums; here: which
//	            chunks need a check, what a failure means for an entry
//	objmeta     the metadata bucketfs writes on objects, conflict names
//	readpattern what a handle's reads say its download should fetch;
//	            here: the whole fetch started (fetch.go's promote)
//	read        the Handle, behind read.Cache (handle.go); here: which
//	            copy a handle reads and which download fills it
//	warm        'bucketfs warm', behind warm.Cache (warm.go); here: the
//	            filling and pinning of one version
//	upload      one transfer's conversation with the bucket, behind
//	            upload.Ledger (uploadledger.go); here: the snapshot it
//	            sends (takeUpload) and every change of the entry
//	send        one request, parts or a server-side copy; staging
//	            prefixes and their cleaner; here: when a name is sent
//	folders     a hierarchical namespace's folder calls; here: whether a
//	            directory rename may use them, its names frozen meanwhile
//	renameplan  the records a rename writes; here: the entries, files,
//	            journal entry and handles that follow
//	pending     the uploader's queue and the local overlay's names,
//	            guarded by Cache.mu like a map; here: whether a name is
//	            dirty, deleted, held or open
//	holds       what renames hold back (versions pending copies read,
//	            prefixes under way, copies just made), guarded by
//	            Cache.mu; here: which entry holds what, and when
//	report      the Stats and Status types, the ring of recent failures,
//	            a repeating warning's limiter, guarded by Cache.mu; here:
//	            what a snapshot lists and counts
//
// The packages behind an interface (read, warm, upload) hold no lock of
// this package's: each method of their interface is one critical section
// of Cache.mu, implemented here, and is never called with it held.
package cache
