package durable

import (
	"fmt"
	"os"
)

// The making of data files, in the journal's data directory (a journal
// opened with none makes none). Each is told to the journal (MadeFile)
// once it is made, so that the sync that makes a record naming it durable
// makes its name durable first (see the top of journal.go).

// Create makes the record of a new copy of name and its data file, in the
// order a crash needs: a new ID; the journal entry putting rec under it;
// then (journaled called with the ID, with no lock of this package held:
// the caller publishes it) the data file, made, described before any byte
// (DescribeFile: the description follows the journal entry, never leads
// it) and sized to rec.Size, sparse. It returns the file, open
// read-write. On error nothing is left open; if journaled was called, the
// journal holds the record, whose file may be missing: the caller removes
// the record (RemoveOp with its ID) and the file.
func (j *Journal) Create(d *Describer, name string, rec Record, journaled func(id uint64)) (*os.File, error) {
	rec.ID = j.NewID()
	if err := j.Append(PutOp(name, rec, 0)); err != nil {
		return nil, fmt.Errorf("cache index: %w", err)
	}
	journaled(rec.ID)
	f, err := j.openNew(rec.ID)
	if err == nil {
		d.DescribeFile(f, name, rec)
		if rec.Size > 0 {
			if err = f.Truncate(rec.Size); err != nil {
				f.Close()
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("creating cache file: %w", err)
	}
	return f, nil
}

// MakeEmptyFile makes the empty data file id (emptying one of that name)
// and tells the journal.
func (j *Journal) MakeEmptyFile(id uint64) error {
	f, err := j.openNew(id)
	if err != nil {
		return err
	}
	return f.Close()
}

// LinkFile makes data file to a hard link of data file from (both IDs
// name one inode then, and one description: see describe.go) and tells
// the journal.
func (j *Journal) LinkFile(from, to uint64) error {
	if err := os.Link(DataPath(j.dataDir, from), DataPath(j.dataDir, to)); err != nil {
		return err
	}
	j.MadeFile()
	return nil
}

// openNew creates the data file id (emptying one of that name), open
// read-write, and tells the journal.
func (j *Journal) openNew(id uint64) (*os.File, error) {
	f, err := os.OpenFile(DataPath(j.dataDir, id), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	j.MadeFile()
	return f, nil
}
