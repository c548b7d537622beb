package recovery

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	bolt "go.etcd.io/bbolt"
)

const testBucket = "test-bucket"

// cacheDir makes a cache directory with an index holding recs, and
// data files of the given contents by ID.
func cacheDir(t *testing.T, recs map[string]durable.Record, files map[uint64]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	for id, body := range files {
		if err := os.WriteFile(durable.DataPath(filepath.Join(dir, "data"), id), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	db, err := durable.OpenIndex(filepath.Join(dir, durable.IndexName), testBucket)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		for name, r := range recs {
			if err := durable.PutRecord(tx, name, &r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// inode is the inode number of path.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// openLoader opens the index and journal of cache directory dir as a
// start's loader would, closed when the test ends.
func openLoader(t *testing.T, dir string) *loader {
	t.Helper()
	db, err := durable.OpenIndex(filepath.Join(dir, durable.IndexName), testBucket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	j, _, err := durable.OpenJournal(db, filepath.Join(dir, durable.JournalName), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	dataDir := filepath.Join(dir, "data")
	return &loader{
		LoadOptions: LoadOptions{Dir: dir, Bucket: testBucket, ChunkSize: 64, Desc: durable.NewDescriber(dataDir, quiet()), Log: quiet()},
		dataDir:     dataDir, db: db, j: j,
	}
}

// TestReconcile: each rule that mends the records against their files.
// A record whose file is missing is dropped; a local copy takes its
// file's size; a clean copy of the wrong size is cut to its record's
// size and marked incomplete; a deletion gets an inode of its own; the
// drops and the adopted records reach the index.
func TestReconcile(t *testing.T) {
	recs := map[string]durable.Record{
		"gone":    {ID: 0x1, Size: 4, Complete: true, Dirty: true},
		"local":   {ID: 0x2, Size: 3, ChunkSize: 4, Present: []byte{1}, Dirty: true},
		"short":   {ID: 0x3, Size: 100, ChunkSize: 64, Complete: true, Sums: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		"right":   {ID: 0x4, Size: 5, ChunkSize: 64, Complete: true},
		"deleted": {ID: 0x5, Dirty: true, Deleted: true, Complete: true},
		"renamed": {ID: 0x6, Size: 6, Dirty: true, Complete: true},
	}
	dir := cacheDir(t, recs, map[uint64]string{
		0x2: "ten bytes!",
		0x3: strings.Repeat("x", 40),
		0x4: "right",
		0x7: "adopt",
	})
	dataDir := filepath.Join(dir, "data")
	// A crash between a rename's link and its detach: the deletion's
	// file is another link of the renamed file's inode.
	if err := os.WriteFile(durable.DataPath(dataDir, 0x6), []byte("moved!"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(durable.DataPath(dataDir, 0x6), durable.DataPath(dataDir, 0x5)); err != nil {
		t.Fatal(err)
	}
	l := openLoader(t, dir)
	db := l.db
	adopted := map[string]durable.Record{"adopted": {ID: 0x7, Size: 5, Complete: true, Dirty: true}}
	recs["adopted"] = adopted["adopted"]
	if err := l.reconcile(recs, adopted); err != nil {
		t.Fatal(err)
	}

	if _, ok := recs["gone"]; ok {
		t.Errorf("a record whose file is missing was kept: %+v", recs["gone"])
	}
	if r := recs["local"]; r.Size != 10 || !r.Complete || r.Present != nil {
		t.Errorf("local copy = size %d, complete %v, present %v; want its file's 10 bytes, complete", r.Size, r.Complete, r.Present)
	}
	if r := recs["short"]; r.Size != 100 || r.Complete || r.Present != nil || r.Sums != nil {
		t.Errorf("clean copy of the wrong size = %+v; want size 100, incomplete, no sums", r)
	}
	if st, err := os.Stat(durable.DataPath(dataDir, 0x3)); err != nil || st.Size() != 100 {
		t.Errorf("the short copy's file: %v, %v; want 100 bytes", st, err)
	}
	if l.wrongSize != 1 {
		t.Errorf("wrongSize = %d, want 1", l.wrongSize)
	}
	if r := recs["right"]; r.Size != 5 || !r.Complete {
		t.Errorf("clean copy of the right size changed: %+v", r)
	}
	if r := recs["deleted"]; r.Size != 0 || !r.Complete {
		t.Errorf("deletion = size %d, complete %v; want 0, complete", r.Size, r.Complete)
	}
	if inode(t, durable.DataPath(dataDir, 0x5)) == inode(t, durable.DataPath(dataDir, 0x6)) {
		t.Error("the deletion's file still shares the renamed file's inode")
	}
	if b, err := os.ReadFile(durable.DataPath(dataDir, 0x6)); err != nil || string(b) != "moved!" {
		t.Errorf("the renamed file holds %q, %v; want its bytes kept", b, err)
	}

	onDisk, err := durable.LoadRecords(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := onDisk["gone"]; ok {
		t.Error("the index still holds the record whose file is missing")
	}
	if r, ok := onDisk["adopted"]; !ok || r.ID != 0x7 {
		t.Errorf("the index holds adopted = %+v, %v; want ID 7", r, ok)
	}
}

// TestLoadCountsWrongSize: Load returns the index and the journal open,
// the records mended, and how many clean copies had the wrong size.
func TestLoadCountsWrongSize(t *testing.T) {
	dir := cacheDir(t, map[string]durable.Record{
		"short": {ID: 0x1, Size: 8, ChunkSize: 64, Complete: true},
		"gone":  {ID: 0x2, Size: 8, ChunkSize: 64, Complete: true},
	}, map[uint64]string{0x1: "four"})
	dataDir := filepath.Join(dir, "data")
	ld, err := Load(LoadOptions{Dir: dir, Bucket: testBucket, ChunkSize: 64, Desc: durable.NewDescriber(dataDir, quiet()), Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer ld.DB.Close()
	defer ld.Journal.Close()
	if ld.WrongSize != 1 {
		t.Errorf("WrongSize = %d, want 1", ld.WrongSize)
	}
	if len(ld.Records) != 1 || ld.Records["short"].Complete {
		t.Errorf("Records = %+v; want short alone, incomplete", ld.Records)
	}
}

// TestByAccess: the records loaded come most recently used first.
func TestByAccess(t *testing.T) {
	ld := Loaded{Records: map[string]durable.Record{
		"old": {LastAccess: 1}, "new": {LastAccess: 3}, "mid": {LastAccess: 2},
	}}
	if got := ld.ByAccess(); !slices.Equal(got, []string{"new", "mid", "old"}) {
		t.Errorf("ByAccess = %q, want new, mid, old", got)
	}
}

// TestReconcileRemakesWhatNeedsNoBytes: a pending change whose data file
// is missing but needs no bytes of its own (a deletion, a pending copy,
// a metadata change) keeps its record, with its file made again; only
// changed content whose file is gone is lost (and said so).
func TestReconcileRemakesWhatNeedsNoBytes(t *testing.T) {
	recs := map[string]durable.Record{
		"deleted": {ID: 0x1, Dirty: true, Deleted: true, Complete: true, Generation: 3},
		"copy":    {ID: 0x2, Size: 9, ChunkSize: 64, Dirty: true, CopyFrom: "old/copy", CopyGen: 4, Complete: true},
		"chmod":   {ID: 0x3, Size: 7, ChunkSize: 64, Dirty: true, MetaOnly: true, Complete: true, Generation: 5, Meta: map[string]string{"mode": "600"}},
		"written": {ID: 0x4, Size: 4, Dirty: true, Complete: true},
	}
	dir := cacheDir(t, recs, nil) // no data file: every record's is missing
	dataDir := filepath.Join(dir, "data")
	l := openLoader(t, dir)
	db := l.db
	if err := l.reconcile(recs, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := recs["written"]; ok {
		t.Errorf("changed content whose file is gone was kept: %+v", recs["written"])
	}
	for name, want := range map[string]int64{"deleted": 0, "copy": 9, "chmod": 7} {
		r, ok := recs[name]
		if !ok {
			t.Errorf("%s: the pending change was dropped", name)
			continue
		}
		st, err := os.Stat(durable.DataPath(dataDir, r.ID))
		if err != nil || st.Size() != want {
			t.Errorf("%s: its file is %v, %v; want one of %d bytes", name, st, err, want)
		}
		if d, err := durable.ReadDescription(durable.DataPath(dataDir, r.ID)); err != nil || d == nil || d.ID != r.ID {
			t.Errorf("%s: the remade file is not described: %+v, %v", name, d, err)
		}
		if name != "deleted" && (r.Complete || r.Present != nil) {
			t.Errorf("%s: a remade copy counts bytes present: %+v", name, r)
		}
	}
	if r := recs["copy"]; r.CopyFrom != "old/copy" || r.CopyGen != 4 {
		t.Errorf("the pending copy lost its source: %+v", r)
	}
	if r := recs["chmod"]; r.Meta["mode"] != "600" || !r.MetaOnly {
		t.Errorf("the metadata change was lost: %+v", r)
	}
	onDisk, err := durable.LoadRecords(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"deleted", "copy", "chmod"} {
		if _, ok := onDisk[name]; !ok {
			t.Errorf("%s: gone from the index", name)
		}
	}
}
