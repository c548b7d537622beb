package cache

import (
	"context"
	"slices"

	"github.com/bucketfs/bucketfs/cache/internal/upload"
	"github.com/bucketfs/bucketfs/transfer"
)

// uploadLedger is the entries' side of the uploads' conversation with the
// bucket (upload.Ledger; the contracts are on its methods there). Each
// method is one critical section of Cache.mu (some then write the
// record to the journal under the entry's PersistMu, or remove the data
// files of entries they let go), called by the flow with no lock held.
//
// The flow names an entry by the pointer itself (upload.Job's Entry is
// an *entry, a type parameter to package upload, which cannot look into
// it): a transfer is about the entry it took its snapshot of, never
// about whatever holds the name now. A file renamed over the name
// meanwhile is another entry, and telling the two apart is what
// supersededLocked does.
type uploadLedger struct{ c *Cache }

var _ upload.Ledger[*entry] = uploadLedger{}

// Tries reads e.Rec.Attempts (a copy) and e.Rec.SavingAs.
func (l uploadLedger) Tries(u uploadJob) upload.Tries {
	c, e := l.c, u.Entry
	c.mu.Lock()
	defer c.mu.Unlock()
	return upload.Tries{Attempts: slices.Clone(e.Rec.Attempts), SavingAs: e.Rec.SavingAs}
}

// Hold is hold (checksum.go): record.Damaged, counted, noted, logged
// and journaled.
func (l uploadLedger) Hold(u uploadJob, bad []int, why error) bool {
	return l.c.hold(u.Entry, u.Name, bad, why)
}

// Stop clears e.Uploading and, for a failure, schedules the next try
// (failedLocked).
func (l uploadLedger) Stop(ctx context.Context, u uploadJob, err error) {
	c, e := l.c, u.Entry
	c.mu.Lock()
	e.Uploading = false
	if err != nil {
		c.failedLocked(ctx, e, err)
	}
	c.notifyLocked()
	c.mu.Unlock()
}

// Rebase moves e.Rec.Generation from u.Base to gen.
func (l uploadLedger) Rebase(u uploadJob, gen int64) {
	c, e := l.c, u.Entry
	c.mu.Lock()
	if e.Rec.Generation == u.Base {
		e.Rec.Generation = gen
	}
	c.mu.Unlock()
}

// Requeue clears e.Uploading, moves e.Rec.Generation from u.Base to gen,
// and queues the name at once.
func (l uploadLedger) Requeue(u uploadJob, gen int64) {
	c, e := l.c, u.Entry
	c.mu.Lock()
	e.Uploading = false
	if e.Rec.Generation == u.Base {
		e.Rec.Generation = gen
	}
	c.scheduleLocked(u.Name, 0)
	c.notifyLocked()
	c.mu.Unlock()
}

// RecordAttempt is recordAttempt (upload.go).
func (l uploadLedger) RecordAttempt(u uploadJob, id, copyAs string) error {
	return l.c.recordAttempt(u.Entry, id, copyAs)
}

// Superseded is supersededLocked (upload.go).
func (l uploadLedger) Superseded(u uploadJob, a transfer.ObjectAttrs, err error) bool {
	c := l.c
	c.mu.Lock()
	superseded := c.supersededLocked(u.Entry, u.Name, u.Base, a, err)
	c.mu.Unlock()
	return superseded
}

// Done is uploadDone (upload.go).
func (l uploadLedger) Done(ctx context.Context, u uploadJob, body fileSums, attrs transfer.ObjectAttrs, err error) {
	l.c.uploadDone(ctx, u, body, attrs, err)
}

// Conflict is conflictDone (conflictcopy.go).
func (l uploadLedger) Conflict(u uploadJob, sibling string) bool {
	return l.c.conflictDone(u, sibling)
}

// Uploaded sets e.UploadedSeq to u.Seq.
func (l uploadLedger) Uploaded(u uploadJob) {
	c, e := l.c, u.Entry
	c.mu.Lock()
	e.UploadedSeq = u.Seq
	c.notifyLocked()
	c.mu.Unlock()
}

// SourceGone is sourceGone (rename.go).
func (l uploadLedger) SourceGone(u uploadJob, now string) {
	l.c.sourceGone(u, now)
}

// ForgetCopy forgets the name's made copy (madecopies.go).
func (l uploadLedger) ForgetCopy(u uploadJob) {
	c := l.c
	c.mu.Lock()
	c.madeCopies.Forget(u.Name)
	c.ownGone.Forget(u.Name)
	c.mu.Unlock()
}

// Deleted is deleteDone (upload.go).
func (l uploadLedger) Deleted(ctx context.Context, u uploadJob, err error, gone bool) {
	l.c.deleteDone(ctx, u, err, gone)
}

// Patched is patchDone (meta.go).
func (l uploadLedger) Patched(ctx context.Context, u uploadJob, err error, lost bool) {
	l.c.patchDone(ctx, u, err, lost)
}

// Confirm is confirm (upload.go): the OnConfirmed function.
func (l uploadLedger) Confirm(name string, a transfer.ObjectAttrs, deleted bool) {
	l.c.confirm(name, a, deleted)
}
