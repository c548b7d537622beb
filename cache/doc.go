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
// internal/verify, internal/integrity).
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
//	cache.go        Cache, Open, acquiring and creating entries, handles (newHandle), Close
//	entry.go        entry (internal/entries, and the handles open on it); entering
//	                and leaving the index, set aside for a rename; its record written
//	state.go        Cache's guarded state by subsystem; invariants
//	wait.go         waiting for a change under Cache.mu (notifyLocked, waitLocked)
//	load.go         a start: the records internal/recovery loaded (Load), in
//	                their order of use, made entries, re-queued, evicted to the cap
//	record.go       record, an alias of durable.Record
//	fsck.go         Fsck, InUse, IndexPath: wrappers of internal/recovery
//
//	evict.go        making room: eviction, dropping and removing entries
//	space.go        the limits; charging entries (costOf), growth, hidden writers
//	room.go         a write's tries for room (tryRoom; the wait: space.WaitForRoom),
//	                which files hold the room
//
//	handle.go       Handle, an alias of read.Handle; handleCache (read.Cache)
//	fetch.go        the entries' side of their downloads (internal/fetch):
//	                made (downloadLocked), promoted, taken, retired (fillLedger)
//	prefetch.go     Prefetch (fetch.Prefetch): prefetchLedger; free room only
//	warm.go         Warm, WarmVersion, Unpin: wrappers of internal/warm; what it
//	                fills and whose pins it ends (warmTarget); setPin
//	checksum.go     integrity: the entries' side of the live checks (verifyLedger:
//	                verify.Ledger), held files (hold), adopted sums, Resolve
//
//	writeback.go    the durability contract; Remove; Flush, FlushName and their
//	                side of writeback.Ledger
//	writehandle.go  WriteHandle, an alias of write.Handle; OpenWrite; writeLedger
//	                (write.Cache): changes (Begin, End), Close; handles moved, orphaned
//	untouched.go    an open for writing that writes nothing (passthrough): the entry's side
//	uploader.go     what each queued name waits for (schedule, TakeDue, mustWaitLocked);
//	                the uploader's side of writeback.Ledger (the queue: internal/pending;
//	                the loop: internal/writeback)
//	upload.go       an upload's snapshot (takeUpload) and its settling (uploadDone,
//	                settleLocked, deleteDone), failures and their retries
//	uploadledger.go the entries' side of an upload's conversation (upload.Ledger)
//	send.go         the Sender (internal/send): making it, running its cleaner; CleanStaging
//	refusal.go      uploads the bucket refuses: held, or named loudly
//	offline.go      uploads cut short by an outage, queued again
//	conflictcopy.go settling a conflict copy (conflictDone)
//	conflictnote.go OnConflict and its call, what the file system asks about conflicts
//	ownupload.go    this cache's own versions, as the file system asks (OwnUpload, Rebased)
//	announce.go     RemoteChanged: another writer's change, as notifications tell it
//	overlay.go      the local overlay listings read (Local, LocalNames, LocalSubdirs,
//	                Settled): what each name stands for (changeLocked)
//	meta.go         custom metadata, SetMeta, and settling its patch (patchDone)
//	metapatch.go    PatchMeta: a metadata change sent at once
//	status.go       Status and Stats: the snapshot gathered from the entries (internal/report)
//
//	renamefile.go   renaming one file (Rename): fileLedger (internal/filerename);
//	                targets waited for and set aside
//	exchange.go     swapping two names (Exchange): its side of the same flow
//	rename.go       renaming a directory (RenameDir): dirLedger and one try,
//	                dirRename (internal/dirrename); holds on copy sources
//	folder.go       folder renames in a hierarchical namespace (internal/folders)
//	madecopies.go   why copies just made are remembered (holds.MadeCopies)
//
// The internal packages, each with its own package comment (what it
// owns, its invariants, its locks), and what stays here of each:
//
//	entries     an entry's state by group, the rules of one entry alone
//	            (Clean, Dirtied, StuckSince, CleanContent, AllChecked),
//	            the order of its record's writes (Snapshot, Persist);
//	            guarded by Cache.mu but PersistMu; here: which entries
//	            exist, every change that needs more than one
//	durable     the index's bbolt schema, the journal, the Record and its
//	            encodings, the data files' descriptions, the making of
//	            data files (Journal.Create: the record, then its file;
//	            empty files and links, told to the journal); here: which
//	            records exist and when they change
//	space       the cap and the sum of the charges, the disk's floor and
//	            free space, the wake of writers waiting for room, under
//	            its own lock, and a write's wait for room (WaitForRoom);
//	            here: what each entry is charged, which entries are
//	            evicted, each try of a waiting write (room.go)
//	recovery    a start's loading and the order of use of what it loaded,
//	            a damaged index rebuilt, files no record names placed or
//	            moved to lost+found, Fsck; needs none of the cache's
//	            state; here: the entries made from what Load returns
//	integrity   a data file read against its chunk sums
//	verify      the live checks of copies (a read's chunks, a copy at its
//	            open or in the background, before a change; Resolve's
//	            drop), behind verify.Ledger (checksum.go); here: what a
//	            failure means for an entry
//	objmeta     the metadata bucketfs writes on objects, a local
//	            version's metadata after a change (Set) and as its file
//	            shows it (OfFile), conflict names
//	readpattern what a handle's reads say its download should fetch
//	read        the Handle, behind read.Cache (handle.go); here: which
//	            copy a handle reads and which download fills it
//	write       the WriteHandle's I/O (room, begin, bytes, end; limits;
//	            the mark of a hidden open), behind write.Cache
//	            (writehandle.go); here: the handle's entry, each change's
//	            effect on the record, what the last close queues
//	fetch       the downloads that fill copies: made, whole or as read,
//	            bytes by why, an entry's fill (guarded by Cache.mu), a
//	            walk's end and retiring (only synced chunks recorded), a
//	            prefetch, behind fetch.Ledger and fetch.Prefetcher
//	            (fetch.go, prefetch.go); here: the entry's hold, record
//	            and references
//	warm        'bucketfs warm' and ending pins, behind warm.Cache and
//	            warm.Pins (warm.go); here: filling and pinning one version
//	upload      one transfer's conversation with the bucket, behind
//	            upload.Ledger (uploadledger.go); here: the snapshot it
//	            sends (takeUpload) and every change of the entry
//	send        one request, parts or a server-side copy; staging
//	            prefixes and their cleaner; here: when a name is sent
//	writeback   the uploader's loop, the checkpointer, their stop, the
//	            waits of Flush and FlushName, behind writeback.Ledger
//	            (uploader.go, writeback.go); here: which names are
//	            sendable or must wait, what a flush waits for
//	folders     a hierarchical namespace's folder calls; here: whether a
//	            directory rename may use them, its names frozen meanwhile
//	renameplan  the records a rename writes; here: the entries, files,
//	            journal entry and handles that follow
//	filerename  a file's rename and an exchange (the opens, links, one
//	            journal entry, apply or undo), behind filerename.Ledger
//	            (renamefile.go, exchange.go); here: the target waited for
//	            and set aside, the new entries, handles, the deletion
//	dirrename   a directory's rename (its tries, quiescing, the listings,
//	            the folder rename, then plan, files, journal entry, apply
//	            or undo), behind dirrename.Ledger and dirrename.Try
//	            (rename.go, folder.go); here: each step's entries
//	pending     the uploader's queue and the local overlay's names with
//	            their rules, guarded by Cache.mu like a map; here: whether
//	            a name is dirty, deleted, held or open
//	holds       what renames hold back (versions pending copies read,
//	            prefixes under way, copies just made), guarded by
//	            Cache.mu; here: which entry holds what, and when
//	report      the Stats and Status types, what one file counts in them
//	            (Status.Add), the ring of recent failures, a repeating
//	            warning's limiter, guarded by Cache.mu; here: the walk
//	            over the entries
//
// The packages behind an interface (read, write, verify, fetch, warm,
// upload, writeback, filerename, dirrename, space's WaitForRoom) hold no
// lock of this package's: each method of their interface is one
// critical section of Cache.mu, implemented here, and is never called
// with it held.
package cache
