package durable

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// openDataJournal opens the index and journal in dir, with the data
// directory dir/data, and a describer of it.
func openDataJournal(t *testing.T, dir string) (*Journal, *Describer, string) {
	t.Helper()
	dataDir := filepath.Join(dir, "data")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := OpenIndex(filepath.Join(dir, IndexName), testBucket)
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := OpenJournal(db, filepath.Join(dir, JournalName), dataDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close(); db.Close() })
	return j, NewDescriber(dataDir, slog.New(slog.NewTextHandler(io.Discard, nil))), dataDir
}

// TestCreate: the journal has the record before its file exists; the
// file is made (told to the journal), described and sized; a file that
// cannot be made leaves the record journaled (the caller removes it), a
// journal that refuses leaves nothing.
func TestCreate(t *testing.T) {
	j, d, dataDir := openDataJournal(t, t.TempDir())
	var id uint64
	f, err := j.Create(d, "a", Record{Generation: 5, Size: 100, Dirty: true}, func(got uint64) {
		id = got
		recs, _ := j.Records()
		if recs["a"].ID != got {
			t.Errorf("journaled(%d) before the journal had the record: %+v", got, recs)
		}
		if _, err := os.Stat(DataPath(dataDir, got)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the data file exists before its record is journaled: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() != 100 || f.Name() != DataPath(dataDir, id) {
		t.Errorf("file %s (%v, %v), want %s of 100 bytes", f.Name(), st, err, DataPath(dataDir, id))
	}
	if made, _ := j.DataFiles(); made != 1 {
		t.Errorf("%d files made, want 1", made)
	}
	if desc, err := ReadDescription(f.Name()); err != nil || (desc != nil && (desc.ID != id || desc.Name != "a" || !desc.Dirty)) {
		t.Errorf("description %+v, %v; want a's, dirty", desc, err)
	}

	// A directory where the file goes: the record is journaled, no file.
	if err := os.Mkdir(DataPath(dataDir, j.PeekID()), 0o700); err != nil {
		t.Fatal(err)
	}
	id = 0
	if _, err := j.Create(d, "b", Record{Size: 1}, func(got uint64) { id = got }); err == nil || !strings.HasPrefix(err.Error(), "creating cache file: ") {
		t.Errorf("Create onto a directory = %v, want a failure to create the file", err)
	}
	if recs, _ := j.Records(); id == 0 || recs["b"].ID != id {
		t.Errorf("after the file failed: journaled %d, records %+v; want b's record journaled", id, recs)
	}

	j.SetBroken(errors.New("broken"))
	if _, err := j.Create(d, "c", Record{}, func(uint64) { t.Error("journaled called for a refused entry") }); err == nil || !strings.HasPrefix(err.Error(), "cache index: ") {
		t.Errorf("Create with the journal refusing = %v, want the journal's failure", err)
	}
}

// TestMakeAndLinkFiles: an empty file and a hard link are made in the
// data directory, each told to the journal.
func TestMakeAndLinkFiles(t *testing.T) {
	j, _, dataDir := openDataJournal(t, t.TempDir())
	if err := os.WriteFile(DataPath(dataDir, 1), []byte("bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := j.LinkFile(1, 2); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(DataPath(dataDir, 2)); err != nil || string(b) != "bytes" {
		t.Errorf("the link reads %q, %v", b, err)
	}
	if err := j.MakeEmptyFile(5); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(DataPath(dataDir, 5)); err != nil || st.Size() != 0 {
		t.Errorf("the made file: %v, %v; want it empty", st, err)
	}
	if err := j.LinkFile(3, 4); err == nil {
		t.Error("linking a missing file succeeded")
	}
	if made, _ := j.DataFiles(); made != 2 {
		t.Errorf("%d files made, want 2", made)
	}
}
