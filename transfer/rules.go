package transfer

import (
	"context"
	"time"
)

// resumableChunk is the chunk of a resumable upload (PutOptions.Resumable):
// each is one request, retried on its own; the client buffers one.
const resumableChunk = 16 << 20

// DeletionRules are the bucket's settings that keep objects from being
// deleted (or replaced) for a time.
type DeletionRules struct {
	// Retention is the bucket's retention period: an object can be
	// deleted only once it is that old (0: no retention policy).
	Retention       time.Duration
	RetentionLocked bool
	// DefaultEventBasedHold: every new object is held until the hold is
	// released, and cannot be deleted meanwhile.
	DefaultEventBasedHold bool
}

// HoldsDeletes reports whether an object written now could not be deleted
// at once: a staged part would stay, and be billed.
func (r DeletionRules) HoldsDeletes() bool { return r.Retention > 0 || r.DefaultEventBasedHold }

// DeletionRules reads the bucket's retention policy and default
// event-based hold (one buckets.get).
func (g *GCS) DeletionRules(ctx context.Context) (DeletionRules, error) {
	a, err := g.h.Attrs(ctx)
	if err != nil {
		return DeletionRules{}, g.wrap("bucket attributes", "", err)
	}
	r := DeletionRules{DefaultEventBasedHold: a.DefaultEventBasedHold}
	if p := a.RetentionPolicy; p != nil {
		r.Retention, r.RetentionLocked = p.RetentionPeriod, p.IsLocked
	}
	return r, nil
}
