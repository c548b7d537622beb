package cache

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/dirrename"
	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/renameplan"
	"github.com/bucketfs/bucketfs/transfer"
)

// Directory rename. An object store has no directories: renaming one
// renames every object under its prefix. RenameDir does it in the cache
// index at once, in one journal entry, and the bucket follows:
//
//   - An object whose content has local changes keeps its cache file (a
//     hard link under a new ID) and is uploaded under the new name, as a
//     file rename does.
//   - Any other object (cached or not) becomes a pending copy at the new
//     name: a record whose content is "generation G of object OLD"
//     (CopyFrom, CopyGen). Its upload is a server-side copy (no byte is
//     downloaded or uploaded); a read before that fills the cache file
//     from OLD#G; a write first completes the file from there, and from
//     then on the file is the truth.
//   - Every old name becomes a deletion, based on the generation it had.
//
// The copy must find its source: while a pending copy reads OLD#G (and
// while a download fills a pending copy's cache file from it), OLD is
// held (Cache.holds): no change of OLD (its deletion above all) is sent. The hold ends once the journal no longer records the copy as
// pending (made, completed locally, or dropped), never before, so that
// after a crash the journal never names a source that is gone. Holds
// are counted again from the records at start.
//
// After a crash the journal has all of a directory rename or none of
// it; the copies and deletions it recorded go on at the next start.

// holdLocked records e's pending copy, if any, as a hold on its source.
func (c *Cache) holdLocked(e *entry) {
	if !e.Rec.PendingCopy() || e.Holding != "" {
		return
	}
	e.Holding = e.Rec.CopyFrom
	c.holds.Add(e.Holding)
}

// releaseHoldLocked ends e's hold on its source, if it has one, and lets
// the source's own changes go.
func (c *Cache) releaseHoldLocked(e *entry) {
	if e.Holding != "" {
		c.unholdLocked(e.Holding)
		e.Holding = ""
	}
}

// unholdLocked ends one hold on name.
func (c *Cache) unholdLocked(name string) {
	if c.holds.Release(name) {
		if c.queue.Queued(name) {
			c.notifyLocked() // TakeDue passed it over
		}
	}
}

// releaseDownloadHoldLocked ends the hold of e's download, once it is
// detached from e, on the source it read.
func (c *Cache) releaseDownloadHoldLocked(e *entry) {
	if e.DlHold != "" {
		c.unholdLocked(e.DlHold)
		e.DlHold = ""
	}
}

// heldLocked reports whether changes of e's name must wait: a pending
// copy (other than e's own) reads the name's bucket version.
func (c *Cache) heldLocked(e *entry) bool {
	n := c.holds.Held(e.Name)
	if e.Holding == e.Name {
		n--
	}
	return n > 0
}

// sourceGone settles u, a copy whose source version was not found: it
// was changed or deleted in the bucket by someone else before the copy
// was made. A complete cache file still has the bytes: they are uploaded
// instead. Otherwise the content is gone with the source. now says what
// the source's name holds now (the flow asked the bucket: upload.Flow's
// copySourceGone).
func (c *Cache) sourceGone(u uploadJob, now string) {
	e, name, src := u.Entry, u.Name, u.Src
	c.mu.Lock()
	e.Uploading = false
	if e.Rec.CopyFrom != src.From || e.Rec.CopyGen != src.Gen {
		c.scheduleLocked(name, 0) // no longer that copy: send what it is now
		c.notifyLocked()
		c.mu.Unlock()
		return
	}
	e.Rec.CopyFrom, e.Rec.CopyGen, e.Rec.CopyType = "", 0, ""
	c.chargeLocked(e, e.Rec.Size)
	var victims []*entry
	if e.Rec.Complete {
		c.log.Warn("the object a renamed file was copied from changed in the bucket before the copy was made; uploading the cached bytes instead",
			"object", name, "source", src.From, "source_generation", src.Gen, "source_now", now)
		c.scheduleLocked(name, 0)
	} else {
		c.log.Error("a renamed file is lost: the object it was to be copied from was changed or deleted in the bucket by someone else before the copy was made, and no complete copy was cached",
			"object", name, "source", src.From, "source_generation", src.Gen, "source_now", now)
		c.noteErrorLocked("copy", name, fmt.Errorf("source %s#%d is gone from the bucket", src.From, src.Gen))
		e.Clean()
		victims = c.dropLocked(e)
	}
	rec, seq := e.Snapshot()
	c.notifyLocked()
	c.mu.Unlock()
	if len(victims) > 0 {
		c.removeAll(victims)
		return
	}
	if err := c.persistEntry(e, rec, seq); err != nil {
		c.log.Warn("recording a renamed file's content as local failed; the next start tries the copy again", "object", name, "err", err)
	}
}

// ErrBusy means a directory rename found the directory changing under it
// and gave up; trying again later works.
var ErrBusy = dirrename.ErrBusy

// dirMove is the plan for one object of a directory rename (package
// internal/renameplan), with the old name's entry, if it had one when
// planned.
type dirMove struct {
	renameplan.Move
	e *entry

	// What the plan saw of e, under Cache.mu: Prepare works from these,
	// with no lock, and the commit replans if e's record is no longer so
	// (staleLocked).
	needsNew bool   // the new name gets a record (renameplan.NeedsNew)
	deleted  bool   // e was a deletion
	id       uint64 // e's data file, which a linked move links
}

// recOf is the record of m's old entry, nil if it has none. Under
// Cache.mu.
func (m *dirMove) recOf() *record {
	if m.e == nil {
		return nil
	}
	return &m.e.Rec
}

// RenameDir renames every object under prefix from to the same name under
// prefix to (both end in '/'; to holds no file: the caller checked that
// the target directory is empty). It is one atomic change of the index;
// the bucket follows (see the top of this file). Handles open for writing
// on a file under from follow it to its new name.
//
// If the bucket renamed the folder itself (folder.go), RenameDir returns
// the objects known to have moved with their content, by new name (not
// nil); otherwise nil, and the bucket follows with copies.
//
// The flow (its tries, the listings, the folder rename, the order of the
// steps) is package internal/dirrename's; dirLedger and dirRename are
// its steps in the cache.
func (c *Cache) RenameDir(ctx context.Context, from, to string) (map[string]Moved, error) {
	f := dirrename.Flow[*entry]{Ledger: dirLedger{c}, Bucket: c.b, Folders: c.folders, Log: c.log,
		AfterPlan: func(from string) {
			if testAfterPlan != nil {
				testAfterPlan(from)
			}
		}}
	return f.Rename(ctx, from, to)
}

// testAfterPlan, set by tests only, runs in each try of RenameDir between
// the plan (and its files) and the commit.
var testAfterPlan func(from string)

// dirLedger is the cache's side of a directory's rename
// (dirrename.Ledger; the contracts are on its methods there): each
// method is one critical section of Cache.mu, or waits as it says. The
// rest of the cache's side is dirRename (dirrename.Try), one try by
// copies, and folder.go's Freeze, Forget and Thaw.
type dirLedger struct{ c *Cache }

var _ dirrename.Ledger[*entry] = dirLedger{}

// Quiesce waits for c.frozen, then adds to c.quiet and waits for the
// deletions (and pending copies) running under the prefixes.
func (l dirLedger) Quiesce(ctx context.Context, from, to string) error {
	c := l.c
	c.mu.Lock()
	err := c.waitLocked(ctx, func() bool { return !c.frozen.Overlaps(from) && !c.frozen.Overlaps(to) })
	c.mu.Unlock()
	if err != nil {
		return err
	}
	prefixes := []string{from, to}
	c.mu.Lock()
	c.quiet.Add(prefixes...)
	for {
		busy := false
		for name := range c.queue.RunningNames() {
			if e := c.entries[name]; e != nil && e.Uploading && !e.Rec.Deleted && !e.Rec.PendingCopy() {
				continue // an upload of content: its entry stays whatever happens
			}
			for _, p := range prefixes {
				busy = busy || strings.HasPrefix(name, p)
			}
		}
		if !busy {
			c.mu.Unlock()
			return nil
		}
		wake := c.changed
		c.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			l.Unquiesce(from, to)
			return ctx.Err()
		}
		c.mu.Lock()
	}
}

// Unquiesce takes the prefixes out of c.quiet.
func (l dirLedger) Unquiesce(from, to string) {
	c := l.c
	c.mu.Lock()
	c.quiet.Remove(from, to)
	c.notifyLocked()
	c.mu.Unlock()
}

// dirRename is one try of a directory rename by copies (dirrename.Try;
// the contracts are on its methods there), in its phases: plan (which
// names move, and how: dirLedger.Plan), prepare the files (cache files
// for the new records), build the journal entry (check the plan still
// holds, build every record) and write it, apply (the old entries become
// deletions) or undo.
type dirRename struct {
	c                *Cache
	from, to         string
	remote, remoteTo []transfer.ObjectAttrs // the bucket's objects under from and to
	moves            map[string]*dirMove    // by old name
	made             []uint64               // cache files Prepare made: removed if the rename fails

	// Built by Build under Cache.mu.
	now     time.Time
	ops     []durable.Op      // the journal entry
	targets []dirTarget       // entries the new names replace, set aside until the journal has the rename
	tombs   []dirTomb         // the old names' deletions
	sizes   map[uint64]int64  // cache files of copies not cached, to be sized
	fresh   []*entry          // entries made here
	moved   map[*entry]*entry // old entry -> the new name's entry its handles moved to
	olds    []*entry          // old entries that become deletions, by name; their PersistMu is held from Write to Apply or Undo
	isOld   map[*entry]bool
}

// dirTarget is an entry a new name of a directory rename replaces, set
// aside (setAsideLocked) for ne.
type dirTarget struct {
	old *setAside
	ne  *entry
}

// dirTomb is the deletion of one old name of a directory rename.
type dirTomb struct {
	m   *dirMove
	rec record
}

// Plan decides, under the lock, which names move, and how.
func (l dirLedger) Plan(from, to string, remote, remoteTo []transfer.ObjectAttrs) (dirrename.Try, <-chan struct{}) {
	c := l.c
	r := &dirRename{c: c, from: from, to: to, remote: remote, remoteTo: remoteTo}
	c.mu.Lock()
	var waitFor chan struct{}
	local := map[string]*entry{}
	for name, e := range c.entries {
		under := strings.HasPrefix(name, from)
		if !under && !strings.HasPrefix(name, to) {
			continue
		}
		if !isClosed(e.Ready) {
			// Being made: under from, it must be planned as it is;
			// under to, it may be another rename's, never set aside
			// on its way (setAsideLocked).
			waitFor = e.Ready
			break
		}
		if under {
			local[name] = e
		}
	}
	moves := map[string]*dirMove{}
	for name, m := range renameplan.Moves(from, to, r.remote, slices.Collect(maps.Keys(local))) {
		dm := &dirMove{Move: *m, e: local[name]}
		dm.Linked = renameplan.Links(dm.recOf())
		dm.needsNew = renameplan.NeedsNew(from, &dm.Move, dm.recOf())
		if dm.e != nil {
			dm.deleted, dm.id = dm.e.Rec.Deleted, dm.e.Rec.ID
		}
		moves[name] = dm
	}
	c.mu.Unlock()
	r.moves = moves
	return r, waitFor
}

// Prepare makes the cache files for the new records (and deletions
// without an entry), before the records name them: a hard link shares
// the bytes of a local copy; an empty file stands for a copy not cached.
func (r *dirRename) Prepare() error {
	c := r.c
	type linkJob struct{ from, to uint64 }
	var links []linkJob
	var empties []uint64
	for _, m := range r.moves {
		if m.needsNew {
			m.NewID = c.j.NewID()
			if m.Linked {
				links = append(links, linkJob{m.id, m.NewID})
			} else {
				empties = append(empties, m.NewID)
			}
		}
		if m.e == nil {
			m.TombID = c.j.NewID()
			empties = append(empties, m.TombID)
		}
	}
	for _, l := range links {
		if err := c.j.LinkFile(l.from, l.to); err != nil {
			r.cleanup()
			return fmt.Errorf("renaming %s: linking a cache file: %w", r.from, err)
		}
		r.made = append(r.made, l.to)
	}
	for _, id := range empties {
		if err := c.j.MakeEmptyFile(id); err != nil {
			r.cleanup()
			return fmt.Errorf("renaming %s: making a cache file: %w", r.from, err)
		}
		r.made = append(r.made, id)
	}
	return nil
}

// cleanup removes the cache files Prepare made.
func (r *dirRename) cleanup() {
	for _, id := range r.made {
		os.Remove(r.c.dataPath(id))
	}
}

// Build checks the plan still holds, builds every record and publishes
// the new entries (not ready: nothing uses them until the journal has
// them). The entries the new names replace (targets) are set aside until
// the journal has the rename: a crash before must find them as they
// were, and a refusal puts them back.
func (r *dirRename) Build() bool {
	c := r.c
	c.mu.Lock()
	if r.staleLocked() {
		c.mu.Unlock()
		r.cleanup()
		return false
	}
	r.buildLocked()
	c.mu.Unlock()
	return true
}

// Write writes the journal entry, the old entries' PersistMu held (for
// Apply or Undo).
func (r *dirRename) Write() error {
	c := r.c
	for _, e := range r.olds {
		e.PersistMu.Lock()
	}
	// The new entries are not ready: nothing uses their files yet.
	var err error
	for id, size := range r.sizes {
		if err = os.Truncate(c.dataPath(id), size); err != nil {
			err = fmt.Errorf("sizing a cache file: %w", err)
			break
		}
	}
	if err == nil {
		err = c.j.Append(r.ops...)
	}
	return err
}

// staleLocked reports whether the plan no longer holds: an entry under
// from was made, replaced, dropped or written since, or a folder rename
// started.
func (r *dirRename) staleLocked() bool {
	c := r.c
	stale := c.frozen.Overlaps(r.from) || c.frozen.Overlaps(r.to)
	for name, e := range c.entries {
		if strings.HasPrefix(name, r.from) && (r.moves[name] == nil || r.moves[name].e != e) {
			stale = true // made, replaced or dropped since the plan
		}
		if strings.HasPrefix(name, r.to) && !isClosed(e.Ready) {
			stale = true // being made: its maker decides its fate first
		}
	}
	for _, m := range r.moves {
		if m.e != nil && (m.e.Dropped || m.e.Rec.Deleted != m.deleted || m.e.Rec.ID != m.id) {
			// Dropped, or renamed away or deleted (a file renamed out
			// of from now would come back under to), or given another
			// data file since the plan.
			stale = true
		}
		if m.e != nil && !m.Linked && (m.e.Writers > 0 || !m.e.Rec.Deleted && m.e.Rec.LocalContent()) {
			// Opened for writing (its copy completed) or written since
			// the plan made it a copy of the bucket's version: its bytes,
			// and the handles writing them, must move with it now (a
			// handle moved to a new name whose file is not a link of its
			// own would write where nothing reads).
			stale = true
		}
	}
	return stale
}

// buildLocked builds the journal entry: every old name's deletion and
// every new name's record, with the new entries published.
func (r *dirRename) buildLocked() {
	c := r.c
	r.now = time.Now()
	r.sizes = map[uint64]int64{}
	r.moved = map[*entry]*entry{}
	remoteGen := map[string]int64{}
	for _, a := range r.remoteTo {
		remoteGen[a.Name] = a.Generation
	}
	for _, m := range r.moves {
		tomb, write := renameplan.DirTomb(&m.Move, m.recOf(), c.opts.ChunkSize)
		if write {
			r.ops = append(r.ops, durable.PutOp(m.Old, tomb, 0))
		}
		r.tombs = append(r.tombs, dirTomb{m, tomb})
		if m.NewID == 0 {
			continue // deleted here: nothing moves
		}
		r.addNewLocked(m, remoteGen[m.New])
	}
	// Deletions of names that had no entry are entries of their own.
	for _, t := range r.tombs {
		if t.m.e != nil {
			continue
		}
		r.fresh = append(r.fresh, c.publishLocked(t.m.Old, t.rec, r.now))
	}
	// The old entries that become deletions: no earlier state of theirs
	// may reach the journal after the entry below (an upload ending now
	// would put one back, and a crash would then undo the deletion), so
	// nothing else writes their records until they are marked.
	r.isOld = map[*entry]bool{}
	for _, t := range r.tombs {
		if e := t.m.e; e != nil && !e.Rec.Deleted {
			r.olds = append(r.olds, e)
			r.isOld[e] = true
		}
	}
	slices.SortFunc(r.olds, func(a, b *entry) int { return strings.Compare(a.Name, b.Name) })
}

// addNewLocked publishes the new name's entry of move m, based on
// listed, the generation the bucket has under the new name, replacing
// the entry there, if any (set aside until the journal has the rename).
func (r *dirRename) addNewLocked(m *dirMove, listed int64) {
	c := r.c
	base := listed
	var target *setAside
	if old := c.entries[m.New]; old != nil {
		base = renameplan.Base(listed, &old.Rec)
		target = c.setAsideLocked(old, base)
	}
	nrec := renameplan.NewRecord(r.from, &m.Move, m.recOf(), base, c.opts.ChunkSize, func() (int64, bool) {
		st, err := os.Stat(c.dataPath(m.NewID))
		if err != nil {
			return 0, false
		}
		return st.Size(), true
	})
	if !nrec.Complete && nrec.Size > 0 {
		r.sizes[m.NewID] = nrec.Size // the empty file gets the copy's size (Write)
	}
	since := r.now
	if m.e != nil && m.e.Rec.Dirty && !m.e.DirtySince.IsZero() {
		since = m.e.DirtySince // its changes wait as long as they did
	}
	ne := c.publishLocked(m.New, nrec, since)
	if target != nil {
		r.targets = append(r.targets, dirTarget{target, ne})
	}
	r.fresh = append(r.fresh, ne)
	r.ops = append(r.ops, durable.PutOp(m.New, nrec, 0))
	if m.e != nil {
		c.moveHandlesLocked(m.e, ne, nil)
		r.moved[m.e] = ne
	}
}

// unlockOlds releases the old entries' PersistMu, taken by Write.
func (r *dirRename) unlockOlds() {
	for _, e := range r.olds {
		e.PersistMu.Unlock()
	}
}

// Undo takes back a Build the journal refused (err): nothing happened.
// Handles go back to their file's old name, the entries made here go,
// and the entries they were to replace come back.
func (r *dirRename) Undo(err error) {
	c := r.c
	c.mu.Lock()
	for e, ne := range r.moved {
		c.moveHandlesLocked(ne, e, nil)
	}
	var victims []*entry
	for _, ne := range r.fresh {
		victims = append(victims, c.unpublishLocked(ne, err)...)
	}
	for _, t := range r.targets {
		c.restoreLocked(t.old)
	}
	c.mu.Unlock()
	r.unlockOlds()
	r.releaseTargets()
	c.removeAll(victims)
	r.cleanup()
}

// releaseTargets lets go of the references setAsideLocked took.
func (r *dirRename) releaseTargets() {
	for _, t := range r.targets {
		r.c.releaseAside(t.old)
	}
}

// Apply, once the journal has the rename, lets the new entries be used
// and turns the old entries into the deletions it wrote.
func (r *dirRename) Apply() {
	c := r.c
	c.mu.Lock()
	for _, t := range r.targets {
		c.replaceLocked(t.old, t.ne)
	}
	for _, ne := range r.fresh {
		close(ne.Ready)
		if ne.Rec.Dirty {
			c.scheduleLocked(ne.Name, c.opts.WriteBackDelay)
		}
	}
	type detachJob struct {
		id   uint64
		name string
		rec  record
	}
	var detach []detachJob
	written := map[*entry]record{} // what the journal entry says of each old entry
	for _, t := range r.tombs {
		e := t.m.e
		if !r.isOld[e] {
			continue // a deletion already (or one made above)
		}
		if t.m.Linked || e.Rec.LocalContent() {
			detach = append(detach, detachJob{e.Rec.ID, e.Name, t.rec})
			c.moveChargeLocked(e, r.moved[e])
		}
		e.Rec = renameplan.Deletion(t.rec, e.Rec)
		c.orphanLocked(e) // any handle left (none moved: none was open)
		c.deletedLocked(e, r.now)
		written[e] = t.rec
	}
	c.mu.Unlock()
	for e, rec := range written {
		c.settleDeletion(e, rec)
	}
	r.unlockOlds()
	r.releaseTargets()
	for _, d := range detach {
		if err := c.detachData(d.id, d.name, d.rec); err != nil {
			c.log.Warn("giving a renamed file's old name a file of its own failed", "id", d.id, "err", err)
		}
	}
}

// settleDeletion finishes turning e into a deletion whose record rec a
// journal entry wrote, with e.PersistMu held since before that entry:
// what changed in e meanwhile (an upload that ended or was sent moved
// its generation or added an upload ID) is written too, and no snapshot
// taken before is written after.
func (c *Cache) settleDeletion(e *entry, rec record) {
	c.mu.Lock()
	cur := e.Rec
	same := cur.Generation == rec.Generation && slices.Equal(cur.Attempts, rec.Attempts)
	seq := e.RecSeq
	if !same {
		cur, seq = e.Snapshot()
	}
	c.mu.Unlock()
	if !same {
		if err := c.j.Append(durable.PutOp(e.Name, cur, cur.ID)); err != nil {
			c.log.Warn("recording the deletion of a renamed file's old name failed; the next start may leave it in the bucket", "object", e.Name, "err", err)
		}
	}
	e.PersistedSeq = max(e.PersistedSeq, seq)
}
