package report

import (
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
)

// Add counts what each file is: a clean pinned copy its charge, a changed
// file its size (a deletion nothing), a held or refused one in its list;
// the oldest change is the earliest; Dirty lists only if asked.
func TestStatusAdd(t *testing.T) {
	t0 := time.Unix(1000, 0)
	files := []File{
		{Name: "pinned", Rec: &durable.Record{Pinned: true, Size: 10}, Charged: 12, Walking: true},
		{Name: "changed", Rec: &durable.Record{Dirty: true, Size: 5}, Since: t0.Add(time.Minute), Uploading: true},
		{Name: "deleted", Rec: &durable.Record{Dirty: true, Deleted: true, Size: 7}, Since: t0},
		{Name: "held", Rec: &durable.Record{Dirty: true, Size: 3, Damaged: "bad sum"}, Since: t0.Add(time.Hour)},
		{Name: "refused", Rec: &durable.Record{Dirty: true, Size: 2}, Since: t0.Add(time.Hour), RefusedAt: t0, RefusedWhy: "no bucket"},
		{Name: "clean", Rec: &durable.Record{Size: 100}, RefusedWhy: "a clean file is not listed"},
	}
	var s Status
	for _, f := range files {
		s.Add(f, 10)
	}
	if s.Downloading != 1 || s.PinnedFiles != 1 || s.PinnedBytes != 12 {
		t.Errorf("downloading %d, pinned %d (%d bytes); want 1, 1 (12)", s.Downloading, s.PinnedFiles, s.PinnedBytes)
	}
	if s.DirtyFiles != 4 || s.DirtyBytes != 10 || s.DamagedFiles != 1 || !s.OldestDirty.Equal(t0) {
		t.Errorf("dirty %d (%d bytes), damaged %d, oldest %v; want 4 (10), 1, %v", s.DirtyFiles, s.DirtyBytes, s.DamagedFiles, s.OldestDirty, t0)
	}
	if len(s.Held) != 1 || s.Held[0] != (HeldFile{Name: "held", Why: "bad sum"}) {
		t.Errorf("Held = %+v", s.Held)
	}
	if len(s.Refused) != 1 || s.Refused[0] != (RefusedFile{Name: "refused", Since: t0, Why: "no bucket"}) {
		t.Errorf("Refused = %+v", s.Refused)
	}
	if len(s.Dirty) != 4 || s.Dirty[0] != (DirtyFile{Name: "changed", Size: 5, Since: t0.Add(time.Minute), Uploading: true}) ||
		s.Dirty[1] != (DirtyFile{Name: "deleted", Since: t0, Deleted: true}) {
		t.Errorf("Dirty = %+v", s.Dirty)
	}

	var none Status
	none.Add(files[1], 0)
	if none.DirtyFiles != 1 || none.Dirty != nil {
		t.Errorf("with maxDirty 0: %d dirty, listed %+v; want 1, none", none.DirtyFiles, none.Dirty)
	}
}
