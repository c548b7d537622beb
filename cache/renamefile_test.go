package cache

import (
	"errors"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// TestRenameOfAFileItsDirectoryLeft: a file's rename whose open of the
// file came just before its directory's rename (the kernel orders a
// rename in a directory with its parent's rename of it in nothing) reads
// the handle's entry under the lock, and gives up (ErrBusy) once the file
// has another name: the file stays where the directory's rename put it.
// Before, Rename read the handle's entry with no lock (a data race) and
// renamed the old name's entry, a deletion by then: the new name got a
// copy of the bytes and the journal a second deletion of the old name.
func TestRenameOfAFileItsDirectoryLeft(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour)
	e.write(c, transfer.ObjectAttrs{Name: "d/f"}, true, 0, pattern(10<<10, 1))
	done := make(chan error, 1)
	testAfterJoin = func(string) {
		testAfterJoin = nil
		go func() {
			_, err := c.RenameDir(e.ctx, "d/", "e/")
			done <- err
		}()
		// The directory's rename (a few ms) moves the rename's handle
		// meanwhile.
		time.Sleep(500 * time.Millisecond)
	}
	defer func() { testAfterJoin = nil }()
	_, err := c.Rename(e.ctx, transfer.ObjectAttrs{Name: "d/f"}, "g", 0)
	if derr := <-done; derr != nil {
		t.Fatal(derr)
	}
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("renaming a file its directory's rename moved: %v, want ErrBusy", err)
	}
	e.mustHaveLocal(c, map[string][]byte{"e/f": pattern(10<<10, 1)})
	if _, ok := c.Local("g"); ok {
		t.Error("g exists after a rename that gave up")
	}
	e.flush(c)
	if names := e.bucketNames(); len(names) != 2 || names[0] != "e/" || names[1] != "e/f" {
		t.Errorf("the bucket holds %v, want e/ and e/f", names)
	}
}
