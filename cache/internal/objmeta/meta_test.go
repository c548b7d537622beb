package objmeta

import (
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// An upload's metadata carries the local version's keys, the file's time
// and the upload's ID; a new local version keeps all but the ID; a
// version compares the same whatever upload wrote it.
func TestUploadMetaRoundTrip(t *testing.T) {
	mtime := time.Date(2026, 11, 28, 10, 11, 12, 13, time.UTC)
	local := map[string]string{"mode": "100644"}
	id := NewAttemptID()
	if len(id) != 16 || id == NewAttemptID() {
		t.Fatalf("upload IDs: %q, not 16 hex digits or not new each time", id)
	}
	up := ForUpload(local, mtime, id)
	if up["mode"] != "100644" || up[AttemptKey] != id || up[MtimeKey] != FormatMtime(mtime) {
		t.Fatalf("ForUpload = %v", up)
	}
	if _, ok := local[AttemptKey]; ok {
		t.Fatalf("ForUpload changed the local version's map: %v", local)
	}
	if own := Own(up); own[AttemptKey] != "" || own["mode"] != "100644" {
		t.Errorf("Own kept the upload ID or lost a key: %v", own)
	}
	if !SameMeta(up, local, mtime) {
		t.Errorf("an upload's metadata does not compare the same as what it sent")
	}
	if SameMeta(up, local, mtime.Add(time.Second)) {
		t.Errorf("metadata with another time compares the same")
	}
	if !WrittenBy(up, []string{"x", id}) || WrittenBy(up, []string{"x"}) || WrittenBy(Own(up), []string{""}) {
		t.Errorf("WrittenBy does not tell the upload's own versions")
	}
	got := Mtime(transfer.ObjectAttrs{Metadata: up, Updated: mtime.Add(time.Hour)})
	if !got.Equal(mtime) {
		t.Errorf("Mtime = %v, want the key's %v", got, mtime)
	}
	updated := mtime.Add(time.Hour)
	if got := Mtime(transfer.ObjectAttrs{Metadata: map[string]string{MtimeKey: "not a time"}, Updated: updated}); !got.Equal(updated) {
		t.Errorf("Mtime of a bad key = %v, want the object's write time", got)
	}
}

// Set keeps the local version's keys, or with none and no local changes
// the bucket version's (less the upload ID), adds md's, and never changes
// a map it was given.
func TestSet(t *testing.T) {
	bucket := map[string]string{"mode": "600", AttemptKey: "x"}
	md := map[string]string{"uid": "7"}
	if got := Set(nil, false, bucket, md); len(got) != 2 || got["mode"] != "600" || got["uid"] != "7" {
		t.Errorf("Set on a copy of the bucket's version = %v, want its mode, uid 7, no upload ID", got)
	}
	if got := Set(nil, true, bucket, md); len(got) != 1 || got["uid"] != "7" {
		t.Errorf("Set on a changed version without metadata = %v, want uid 7 only", got)
	}
	local := map[string]string{"mode": "644", "uid": "1"}
	if got := Set(local, true, bucket, md); len(got) != 2 || got["mode"] != "644" || got["uid"] != "7" {
		t.Errorf("Set on a local version = %v, want its mode, uid 7", got)
	}
	if local["uid"] != "1" || len(bucket) != 2 || len(md) != 1 {
		t.Errorf("Set changed a map it was given: %v %v %v", local, bucket, md)
	}
	if got := Set(nil, true, nil, nil); got == nil {
		t.Error("Set with nothing gave a nil map, want an empty one")
	}
}

// A local version shows its file's size and time; MtimeKey follows the
// file's time in a new map, and is not added where there was none.
func TestOfFile(t *testing.T) {
	old := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := old.Add(time.Hour)
	md := map[string]string{MtimeKey: FormatMtime(old), "mode": "100644"}
	a := OfFile(transfer.ObjectAttrs{Name: "f", Generation: 7, Size: 1, Metadata: md}, 42, now)
	if a.Name != "f" || a.Generation != 7 || a.Size != 42 || !a.Updated.Equal(now) || a.Metadata[MtimeKey] != FormatMtime(now) || a.Metadata["mode"] != "100644" {
		t.Errorf("OfFile = %+v", a)
	}
	if md[MtimeKey] != FormatMtime(old) {
		t.Errorf("OfFile changed the record's map: %v", md)
	}
	if b := OfFile(transfer.ObjectAttrs{Metadata: map[string]string{"mode": "1"}}, 0, now); len(b.Metadata) != 1 {
		t.Errorf("OfFile added MtimeKey: %v", b.Metadata)
	}
}
