package cache

import (
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// Every way a data file comes to be (a create, a file's rename, an
// exchange, a directory's rename) tells the journal, so that a sync
// makes the file's name durable before the record naming it
// (durable.Journal.MadeFile): after each, more files are counted as
// made, and after a sync all of them are durable.
func TestMadeFilesAreSyncedBeforeTheirRecords(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	step := func(what string, do func()) {
		t.Helper()
		before, _ := c.j.DataFiles()
		do()
		made, _ := c.j.DataFiles()
		if made <= before {
			t.Errorf("%s: %d data files made before, %d after; want more", what, before, made)
		}
		if err := c.Sync(); err != nil {
			t.Fatalf("%s: Sync: %v", what, err)
		}
		if made, synced := c.j.DataFiles(); synced != made {
			t.Errorf("%s: after Sync %d of %d data files' names are durable", what, synced, made)
		}
	}
	step("a create", func() {
		w, err := c.OpenWrite(e.ctx, transfer.ObjectAttrs{Name: "d/n"}, true, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteAt([]byte("new"), 0); err != nil {
			t.Fatal(err)
		}
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		if made, synced := c.j.DataFiles(); synced != made {
			t.Errorf("after WriteHandle.Sync %d of %d data files' names are durable", synced, made)
		}
		w.Close()
	})
	e.write(c, transfer.ObjectAttrs{Name: "o"}, true, 0, []byte("other"))
	step("a file's rename", func() {
		n, _ := c.Local("d/n")
		if _, err := c.Rename(e.ctx, n, "d/m", 0); err != nil {
			t.Fatal(err)
		}
	})
	step("an exchange", func() {
		m, _ := c.Local("d/m")
		o, _ := c.Local("o")
		if _, _, err := c.Exchange(e.ctx, m, o); err != nil {
			t.Fatal(err)
		}
	})
	step("a directory's rename", func() {
		if _, err := c.RenameDir(e.ctx, "d/", "e/"); err != nil {
			t.Fatal(err)
		}
	})
}
