package renameplan

import (
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/objmeta"
	"github.com/bucketfs/bucketfs/transfer"
)

const chunk = 1 << 20

func TestMoves(t *testing.T) {
	remote := []transfer.ObjectAttrs{{Name: "d/a", Generation: 3}, {Name: "d/s/b", Generation: 4}}
	got := Moves("d/", "e/", remote, []string{"d/a", "d/c"})
	want := map[string]Move{
		"d/a":   {Old: "d/a", New: "e/a", Remote: remote[0]},
		"d/s/b": {Old: "d/s/b", New: "e/s/b", Remote: remote[1]},
		"d/c":   {Old: "d/c", New: "e/c"},
		// The placeholder goes even when the bucket has none.
		"d/": {Old: "d/", New: "e/", Remote: transfer.ObjectAttrs{Name: "d/", Generation: -1}},
	}
	if len(got) != len(want) {
		t.Fatalf("moves %v, want the names of %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for name, w := range want {
		if g := got[name]; g == nil || !reflect.DeepEqual(*g, w) {
			t.Errorf("move of %s: %+v, want %+v", name, g, w)
		}
	}
	// A listed placeholder is kept as listed.
	withDir := Moves("d/", "e/", []transfer.ObjectAttrs{{Name: "d/", Generation: 9}}, nil)
	if g := withDir["d/"].Remote.Generation; g != 9 {
		t.Errorf("listed placeholder's generation %d, want 9", g)
	}
}

func TestLinks(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  *durable.Record
		want bool
	}{
		{"no entry", nil, false},
		{"local change", &durable.Record{Dirty: true}, true},
		{"complete copy", &durable.Record{Complete: true}, true},
		{"partial copy", &durable.Record{}, false},
		{"deletion", &durable.Record{Deleted: true, Dirty: true, Complete: true}, false},
		{"pending copy", &durable.Record{Dirty: true, CopyFrom: "x"}, false},
		{"complete pending copy", &durable.Record{Dirty: true, CopyFrom: "x", Complete: true}, true},
	} {
		if got := Links(tc.rec); got != tc.want {
			t.Errorf("%s: Links %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNeedsNew(t *testing.T) {
	deleted := &durable.Record{Deleted: true, Dirty: true}
	if NeedsNew("d/", &Move{Old: "d/x"}, deleted) {
		t.Error("a deletion already gets a new record")
	}
	if !NeedsNew("d/", &Move{Old: "d/"}, deleted) {
		t.Error("the directory whose placeholder is deleted gets no new placeholder")
	}
	if !NeedsNew("d/", &Move{Old: "d/x"}, nil) || !NeedsNew("d/", &Move{Old: "d/x"}, &durable.Record{}) {
		t.Error("a name with no entry or a live one gets no new record")
	}
}

func TestDirTomb(t *testing.T) {
	// An entry's record, clean and older than the bucket's: the deletion
	// is based on what the bucket has.
	rec := &durable.Record{ID: 7, Generation: 3, Size: 10, Complete: true, Meta: map[string]string{"k": "v"}, Attempts: []string{"u1"}}
	tomb, write := DirTomb(&Move{Old: "d/a", Remote: transfer.ObjectAttrs{Generation: 5}}, rec, chunk)
	if !write {
		t.Fatal("a live entry's deletion is not written")
	}
	want := durable.Record{ID: 7, Generation: 5, Size: 10, Deleted: true, Dirty: true, Complete: true, Attempts: []string{"u1"}}
	if !reflect.DeepEqual(tomb, want) {
		t.Errorf("tomb %+v, want %+v", tomb, want)
	}
	if rec.Deleted || rec.Meta == nil {
		t.Error("Tomb changed the record it was given")
	}
	// A changed entry keeps its own base: its change is newer than nothing.
	dirty := &durable.Record{ID: 7, Generation: 3, Dirty: true, CopyFrom: "x", CopyGen: 2}
	tomb, _ = DirTomb(&Move{Remote: transfer.ObjectAttrs{Generation: 5}}, dirty, chunk)
	if tomb.Generation != 3 || tomb.CopyFrom != "" || tomb.CopyGen != 0 {
		t.Errorf("changed entry's tomb %+v, want generation 3 and no copy source", tomb)
	}
	// No entry: a record of its own.
	tomb, write = DirTomb(&Move{TombID: 9, Remote: transfer.ObjectAttrs{Generation: 4}}, nil, chunk)
	want = durable.Record{ID: 9, Generation: 4, ChunkSize: chunk, Deleted: true, Dirty: true, Complete: true}
	if !write || !reflect.DeepEqual(tomb, want) {
		t.Errorf("tomb %+v (written %v), want %+v", tomb, write, want)
	}
	// A deletion already stays as it is, unwritten.
	del := &durable.Record{ID: 3, Generation: 2, Deleted: true, Dirty: true, Complete: true}
	tomb, write = DirTomb(&Move{Remote: transfer.ObjectAttrs{Generation: 8}}, del, chunk)
	if write || !reflect.DeepEqual(tomb, *del) {
		t.Errorf("a deletion's tomb %+v (written %v), want it as it was", tomb, write)
	}
}

func TestBase(t *testing.T) {
	for _, tc := range []struct {
		name     string
		listed   int64
		replaced *durable.Record
		want     int64
	}{
		{"nothing there", 0, nil, 0},
		{"listed only", 4, nil, 4},
		{"older clean entry", 4, &durable.Record{Generation: 2}, 4},
		{"newer clean entry", 4, &durable.Record{Generation: 6}, 6},
		{"changed entry on an older base", 4, &durable.Record{Generation: 2, Dirty: true}, 4},
		{"changed entry, not listed", 0, &durable.Record{Generation: 2, Dirty: true}, 2},
	} {
		if got := Base(tc.listed, tc.replaced); got != tc.want {
			t.Errorf("%s: Base %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestNewRecord(t *testing.T) {
	updated := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	noSize := func() (int64, bool) { return 0, false }
	for _, tc := range []struct {
		name string
		m    Move
		rec  *durable.Record
		base int64
		size func() (int64, bool)
		want durable.Record
	}{{
		name: "placeholder not in the bucket: one of its own",
		m:    Move{Old: "d/", New: "e/", NewID: 1, Remote: transfer.ObjectAttrs{Name: "d/", Generation: -1}},
		want: durable.Record{ID: 1, ChunkSize: chunk, Dirty: true, Complete: true},
	}, {
		name: "local content: its bytes, at the file's size",
		m:    Move{Old: "d/a", New: "e/a", NewID: 2, Linked: true},
		rec:  &durable.Record{ID: 5, Generation: 3, Size: 10, Dirty: true, Meta: map[string]string{"k": "v"}},
		base: 6,
		size: func() (int64, bool) { return 12, true },
		want: durable.Record{ID: 2, Generation: 6, ChunkSize: chunk, Dirty: true, Size: 12, Complete: true, Meta: map[string]string{"k": "v"}},
	}, {
		name: "not cached: a copy of the bucket's version, with its time",
		m:    Move{Old: "d/b", New: "e/b", NewID: 3, Remote: transfer.ObjectAttrs{Name: "d/b", Generation: 7, Size: 20, Updated: updated, ContentType: "text/plain"}},
		want: durable.Record{ID: 3, ChunkSize: chunk, Dirty: true, Size: 20, CopyFrom: "d/b", CopyGen: 7, CopyType: "text/plain",
			Meta: map[string]string{objmeta.MtimeKey: objmeta.FormatMtime(updated)}},
	}, {
		name: "complete clean copy: its bytes are the version's",
		m:    Move{Old: "d/c", New: "e/c", NewID: 4, Linked: true, Remote: transfer.ObjectAttrs{Name: "d/c", Generation: 7, Size: 20}},
		rec:  &durable.Record{ID: 6, Generation: 7, Size: 20, Complete: true},
		want: durable.Record{ID: 4, ChunkSize: chunk, Dirty: true, Size: 20, Complete: true, CopyFrom: "d/c", CopyGen: 7},
	}, {
		name: "cached copy of an older version than listed: a copy of the listed one, bytes not",
		m:    Move{Old: "d/c", New: "e/c", NewID: 4, Linked: true, Remote: transfer.ObjectAttrs{Name: "d/c", Generation: 8, Size: 30}},
		rec:  &durable.Record{ID: 6, Generation: 7, Size: 20, Complete: true},
		want: durable.Record{ID: 4, ChunkSize: chunk, Dirty: true, Size: 30, CopyFrom: "d/c", CopyGen: 8},
	}, {
		name: "pending copy: a copy of its source",
		m:    Move{Old: "d/p", New: "e/p", NewID: 5, Remote: transfer.ObjectAttrs{Name: "d/p"}},
		rec:  &durable.Record{ID: 7, Size: 40, Dirty: true, CopyFrom: "x/p", CopyGen: 2, CopyType: "a/b", Meta: map[string]string{"k": "v"}},
		want: durable.Record{ID: 5, ChunkSize: chunk, Dirty: true, Size: 40, CopyFrom: "x/p", CopyGen: 2, CopyType: "a/b", Meta: map[string]string{"k": "v"}},
	}, {
		name: "back where it came from: nothing to copy",
		m:    Move{Old: "d/p", New: "x/p", NewID: 5},
		rec:  &durable.Record{ID: 7, Size: 40, Dirty: true, CopyFrom: "x/p", CopyGen: 2, Meta: map[string]string{"k": "v"}},
		base: 2,
		want: durable.Record{ID: 5, Generation: 2, ChunkSize: chunk, Size: 40, Meta: map[string]string{"k": "v"}},
	}} {
		size := tc.size
		if size == nil {
			size = noSize
		}
		got := NewRecord("d/", &tc.m, tc.rec, tc.base, chunk, size)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

func TestNewRecordKeepsTheSourcesMetadata(t *testing.T) {
	meta := map[string]string{"k": "v"}
	m := &Move{Old: "d/a", New: "e/a", NewID: 1, Remote: transfer.ObjectAttrs{Name: "d/a", Generation: 3, Metadata: meta, Updated: time.Now()}}
	got := NewRecord("d/", m, nil, 0, chunk, nil)
	if got.Meta["k"] != "v" || got.Meta[objmeta.MtimeKey] == "" {
		t.Errorf("metadata %v, want k and the mtime", got.Meta)
	}
	if _, ok := meta[objmeta.MtimeKey]; ok {
		t.Error("NewRecord wrote the mtime into the listing's metadata")
	}
}

func TestDeletion(t *testing.T) {
	tomb := durable.Record{ID: 1, Generation: 5, Deleted: true, Dirty: true, Complete: true, Attempts: []string{"u1"}}
	// An upload ended meanwhile (the entry is clean at a newer
	// generation) and another was sent (a new upload ID).
	cur := durable.Record{ID: 1, Generation: 6, Attempts: []string{"u1", "u2"}}
	got := Deletion(tomb, cur)
	if got.Generation != 6 || !slices.Equal(got.Attempts, []string{"u1", "u2"}) || !got.Deleted {
		t.Errorf("deletion %+v, want generation 6, attempts u1 u2", got)
	}
	if len(tomb.Attempts) != 1 {
		t.Error("Deletion changed the tomb's attempts")
	}
	// A changed entry keeps its base; a tomb based on a newer listing
	// wins over a clean older one.
	if g := Deletion(tomb, durable.Record{Generation: 2, Dirty: true}).Generation; g != 2 {
		t.Errorf("changed entry: generation %d, want 2", g)
	}
	if g := Deletion(tomb, durable.Record{Generation: 2}).Generation; g != 5 {
		t.Errorf("clean older entry: generation %d, want 5", g)
	}
}

func TestTomb(t *testing.T) {
	rec := durable.Record{ID: 4, Generation: 3, Size: 10, Dirty: true, MetaOnly: true, Present: []byte{1},
		Meta: map[string]string{"k": "v"}, CopyFrom: "x", CopyGen: 2, CopyType: "t", Attempts: []string{"u"}}
	got := Tomb(rec)
	want := durable.Record{ID: 4, Generation: 3, Size: 10, Deleted: true, Dirty: true, Complete: true, Attempts: []string{"u"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tomb %+v, want %+v", got, want)
	}
}
