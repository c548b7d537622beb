package durable

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// openTestJournal opens the index and journal in dir, as Open does.
func openTestJournal(t *testing.T, dir string) *Journal {
	t.Helper()
	db, err := OpenIndex(filepath.Join(dir, "index.db"), testBucket)
	if err != nil {
		t.Fatalf("opening the index: %v", err)
	}
	j, _, err := OpenJournal(db, filepath.Join(dir, JournalName), "")
	if err != nil {
		db.Close()
		t.Fatalf("opening the journal: %v", err)
	}
	return j
}

// testBucket is the bucket the test indexes belong to.
const testBucket = "test-bucket"

// records reads the index in dir as the next start sees it: with the
// journal applied.
func records(t *testing.T, dir string) map[string]Record {
	t.Helper()
	db, err := OpenIndex(filepath.Join(dir, IndexName), testBucket)
	if err != nil {
		t.Fatalf("opening the index: %v", err)
	}
	defer db.Close()
	j, _, err := OpenJournal(db, filepath.Join(dir, JournalName), "")
	if err != nil {
		t.Fatalf("opening the journal: %v", err)
	}
	defer j.Close()
	recs, err := LoadRecords(db)
	if err != nil {
		t.Fatalf("loading records: %v", err)
	}
	return recs
}

// crashJournal drops j without a checkpoint.
func crashJournal(j *Journal) {
	j.f.Close()
	j.db.Close()
}

func mustAppend(t *testing.T, j *Journal, ops ...Op) {
	t.Helper()
	if err := j.Append(ops...); err != nil {
		t.Fatalf("append: %v", err)
	}
}

func TestJournalReplay(t *testing.T) {
	dir := t.TempDir()
	j := openTestJournal(t, dir)
	a, b, c := j.NewID(), j.NewID(), j.NewID()
	mustAppend(t, j, PutOp("a", Record{ID: a, Size: 1}, 0))
	mustAppend(t, j, PutOp("b", Record{ID: b, Size: 2}, 0))
	mustAppend(t, j, RemoveOp("a", b))                       // a names file a, not b: no effect
	mustAppend(t, j, PutOp("a", Record{ID: a, Size: 10}, a)) // applies
	mustAppend(t, j, PutOp("b", Record{ID: c, Size: 3}, a))  // b names b: no effect
	mustAppend(t, j, RemoveOp("b", b), PutOp("c", Record{ID: c, Size: 4}, 0))
	if st, err := os.Stat(filepath.Join(dir, JournalName)); err != nil || st.Size() == 0 {
		t.Fatalf("the journal file is empty before a checkpoint (%v)", err)
	}
	crashJournal(j)

	recs := records(t, dir)
	if len(recs) != 2 || recs["a"].Size != 10 || recs["c"].Size != 4 {
		t.Errorf("after a crash and a replay the index holds %+v, want a (size 10) and c (size 4)", recs)
	}
	j = openTestJournal(t, dir)
	defer j.Close()
	if id := j.NewID(); id <= c {
		t.Errorf("after the replay the next ID is %d, want more than %d (IDs must never repeat)", id, c)
	}
	if st, _ := os.Stat(filepath.Join(dir, JournalName)); st.Size() != 0 {
		t.Errorf("the journal holds %d bytes after its replay, want 0", st.Size())
	}
}

// A torn or corrupt entry ends the replay: what follows it was never
// synced either (the journal is synced only as a whole), and an entry's
// changes are applied together or not at all.
func TestJournalTornTail(t *testing.T) {
	for _, c := range []struct {
		name string
		cut  func(data []byte, ends []int) []byte
		want []string
	}{
		{"cut in the last entry", func(d []byte, ends []int) []byte { return d[:ends[2]-3] }, []string{"x", "y"}},
		{"cut in its header", func(d []byte, ends []int) []byte { return d[:ends[1]+5] }, []string{"x", "y"}},
		{"flipped byte in the second", func(d []byte, ends []int) []byte { d[ends[1]-2] ^= 0xff; return d }, []string{"x"}},
		{"zeroes after the end", func(d []byte, ends []int) []byte { return append(d, make([]byte, 100)...) }, []string{"x", "y", "z1", "z2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			j := openTestJournal(t, dir)
			path := filepath.Join(dir, JournalName)
			var ends []int
			for _, ops := range [][]Op{
				{PutOp("x", Record{ID: j.NewID()}, 0)},
				{PutOp("y", Record{ID: j.NewID()}, 0)},
				{PutOp("z1", Record{ID: j.NewID()}, 0), PutOp("z2", Record{ID: j.NewID()}, 0)},
			} {
				mustAppend(t, j, ops...)
				st, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				ends = append(ends, int(st.Size()))
			}
			crashJournal(j)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, c.cut(data, ends), 0o600); err != nil {
				t.Fatal(err)
			}
			recs := records(t, dir)
			if len(recs) != len(c.want) {
				t.Errorf("replayed %d records (%v), want %v", len(recs), recs, c.want)
			}
			for _, n := range c.want {
				if _, ok := recs[n]; !ok {
					t.Errorf("record %s missing after the replay", n)
				}
			}
		})
	}
}

func TestJournalCheckpoint(t *testing.T) {
	dir := t.TempDir()
	j := openTestJournal(t, dir)
	id := j.NewID()
	mustAppend(t, j, PutOp("a", Record{ID: id, Size: 5}, 0))
	if err := j.Update(nil); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if st, _ := os.Stat(filepath.Join(dir, JournalName)); st.Size() != 0 {
		t.Errorf("the journal holds %d bytes after a checkpoint, want 0", st.Size())
	}
	recs, err := LoadRecords(j.db)
	if err != nil || recs["a"].Size != 5 {
		t.Errorf("bbolt after the checkpoint: %+v, %v; want a (size 5)", recs, err)
	}
	// Appends after the checkpoint still replay after a crash.
	mustAppend(t, j, PutOp("a", Record{ID: id, Size: 6}, id))
	crashJournal(j)
	if r := records(t, dir)["a"]; r.Size != 6 {
		t.Errorf("after a crash a has size %d, want 6", r.Size)
	}
	if err := j.Append(PutOp("bad", Record{}, 0)); err == nil {
		t.Errorf("a record without an ID was accepted")
	}
}

// The names of the data files made before a record are durable before
// the record is: the data directory is synced ahead of the journal's own
// sync and ahead of a checkpoint, once for every file made since the
// last time, and not at all when none was; a sync of the directory that
// fails fails the journal's sync and keeps the checkpoint's changes
// pending.
func TestJournalSyncsTheDataDirFirst(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	var synced []string
	var fail error
	old := syncDir
	syncDir = func(d string) error {
		synced = append(synced, d)
		if fail != nil {
			return fail
		}
		return old(d)
	}
	t.Cleanup(func() { syncDir = old })
	db, err := OpenIndex(filepath.Join(dir, IndexName), testBucket)
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := OpenJournal(db, filepath.Join(dir, JournalName), dataDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close(); db.Close() })

	mustAppend(t, j, PutOp("a", Record{ID: j.NewID()}, 0))
	if err := j.Sync(); err != nil || len(synced) != 0 {
		t.Fatalf("no file made: Sync = %v after %d syncs of the directory; want none", err, len(synced))
	}
	j.MadeFile()
	j.MadeFile()
	mustAppend(t, j, PutOp("b", Record{ID: j.NewID()}, 0))
	if err := j.Sync(); err != nil || len(synced) != 1 || synced[0] != dataDir {
		t.Fatalf("two files made: Sync = %v, directories synced %v; want %s once", err, synced, dataDir)
	}
	if made, ok := j.DataFiles(); made != 2 || ok != 2 {
		t.Errorf("DataFiles = %d made, %d durable; want 2, 2", made, ok)
	}
	if err := j.Update(nil); err != nil || len(synced) != 1 {
		t.Errorf("a checkpoint with no file made since: %v, %d syncs of the directory; want 1", err, len(synced))
	}

	j.MadeFile()
	mustAppend(t, j, PutOp("c", Record{ID: j.NewID()}, 0))
	fail = errors.New("injected")
	if err := j.Sync(); !errors.Is(err, fail) {
		t.Errorf("Sync with the directory's sync failing = %v; want the failure", err)
	}
	if err := j.Update(nil); !errors.Is(err, fail) {
		t.Errorf("a checkpoint with the directory's sync failing = %v; want the failure", err)
	}
	if recs, _ := LoadRecords(db); recs["c"].ID != 0 {
		t.Error("a checkpoint whose directory sync failed put the record in bbolt")
	}
	fail = nil
	if err := j.Update(nil); err != nil {
		t.Fatal(err)
	}
	if recs, _ := LoadRecords(db); recs["c"].ID == 0 {
		t.Error("the checkpoint after the directory's sync came back did not put the record in bbolt")
	}
	if made, ok := j.DataFiles(); made != 3 || ok != 3 {
		t.Errorf("DataFiles = %d made, %d durable; want 3, 3", made, ok)
	}
}
