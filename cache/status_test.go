package cache

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

func TestStatus(t *testing.T) {
	e := newEnv(t)
	c := e.openWB(time.Hour) // nothing goes up by itself
	if s := c.Status(10); s.DirtyFiles != 0 || !s.OldestDirty.IsZero() || s.Queued != 0 || len(s.Dirty) != 0 {
		t.Fatalf("status of an empty cache: %+v", s)
	}

	before := time.Now()
	e.write(c, transfer.ObjectAttrs{Name: "a"}, true, 0, []byte("first"))
	e.write(c, transfer.ObjectAttrs{Name: "b"}, true, 0, []byte("second!"))
	s := c.Status(1)
	if s.DirtyFiles != 2 || s.DirtyBytes != 12 || s.Queued != 2 {
		t.Errorf("after two writes: %d dirty files, %d bytes, %d queued; want 2, 12, 2", s.DirtyFiles, s.DirtyBytes, s.Queued)
	}
	if s.OldestDirty.Before(before) || s.OldestDirty.After(time.Now()) {
		t.Errorf("oldest dirty %v, want between %v and now", s.OldestDirty, before)
	}
	if len(s.Dirty) != 1 || s.Dirty[0].Name != "a" || s.Dirty[0].Size != 5 {
		t.Errorf("dirty list (1 asked) %+v, want a (the oldest), 5 bytes", s.Dirty)
	}

	// Reading through a handle counts the bytes served from the cache.
	data := pattern(chunk, 9)
	a := e.put("obj", data)
	h := e.openHandle(c, a)
	buf := make([]byte, 1000)
	readCtx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	if _, err := h.ReadAt(readCtx, buf, 0); err != nil {
		t.Fatal(err)
	}
	h.Close()
	if got := c.Status(0).ReadBytes; got != 1000 {
		t.Errorf("ReadBytes = %d after reading 1000 bytes", got)
	}

	// A refused upload is counted and listed among the recent errors.
	e.emu.SetHook(func(r *http.Request) (int, bool) { return 403, isUpload(r) })
	ctx, cancel2 := context.WithTimeout(e.ctx, 2*time.Second)
	c.Flush(ctx, nil)
	cancel2()
	s = c.Status(0)
	if s.UploadFailures == 0 || len(s.Errors) == 0 || s.Errors[0].Op != "upload" {
		t.Errorf("after refused uploads: %d failures, errors %+v; want some, op upload", s.UploadFailures, s.Errors)
	}
	e.emu.SetHook(nil)
	// Failed uploads wait for a retry minutes away; Flush queues them now.
	e.flush(c)
	s = c.Status(10)
	if s.DirtyFiles != 0 || s.DirtyBytes != 0 || !s.OldestDirty.IsZero() || len(s.Dirty) != 0 || s.Uploads != 2 {
		t.Errorf("after flush: %+v, want nothing dirty and 2 uploads", s)
	}

	// A file changed again after its upload is dirty since the new change.
	mid := time.Now()
	e.write(c, transfer.ObjectAttrs{Name: "b"}, false, 0, []byte("x"))
	if s := c.Status(0); s.OldestDirty.Before(mid) {
		t.Errorf("oldest dirty %v, want at or after %v (the new change)", s.OldestDirty, mid)
	}
}

// Stats and Status count the changed files alike: a pending deletion is
// a changed file of no bytes in both, the old name's of a directory
// rename too (its record keeps the size the copy had).
func TestStatsAgreeWithStatus(t *testing.T) {
	e := newEnv(t)
	a := e.put("d/x", []byte("ten bytes!"))
	c := e.openWB(time.Hour) // nothing goes up by itself
	e.cacheAll(c, a, []byte("ten bytes!"))
	e.write(c, transfer.ObjectAttrs{Name: "new"}, true, 0, []byte("four"))
	if _, err := c.RenameDir(e.ctx, "d/", "e/"); err != nil {
		t.Fatal(err)
	}
	st, ss := c.Stats(), c.Status(0)
	if st.DirtyFiles != ss.DirtyFiles || st.DirtyBytes != ss.DirtyBytes || st.DamagedFiles != ss.DamagedFiles {
		t.Errorf("Stats: %d changed files, %d bytes, %d held; Status: %d, %d, %d; want the same",
			st.DirtyFiles, st.DirtyBytes, st.DamagedFiles, ss.DirtyFiles, ss.DirtyBytes, ss.DamagedFiles)
	}
	// new (4 bytes), e/x (a pending copy of 10), e/ (the new directory's
	// placeholder), and the deletions of d/x and d/.
	if ss.DirtyFiles != 5 || ss.DirtyBytes != 14 {
		t.Errorf("Status: %d changed files, %d bytes; want 5, 14", ss.DirtyFiles, ss.DirtyBytes)
	}
}
