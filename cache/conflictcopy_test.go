package cache

import (
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// conflictEnv is a cache holding a local change of doc that another
// writer replaced in the bucket meanwhile: the next flush saves the
// change as a conflict copy. The cache file's modification time is set
// to mtime behind the cache's back (as a passthrough write leaves it), so
// that only the file can tell the copy its time.
type conflictEnv struct {
	*env
	c     *Cache
	log   *logBuffer
	mtime time.Time
}

func newConflictEnv(t *testing.T, meta map[string]string) *conflictEnv {
	e := &conflictEnv{env: newEnv(t), log: new(logBuffer), mtime: time.Date(2021, 3, 4, 5, 6, 7, 891011121, time.UTC)}
	o := e.opts(64 << 20)
	o.WriteBackDelay = time.Hour // sent by Flush only
	o.Logger = slog.New(slog.NewTextHandler(e.log, nil))
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e.c = c
	a := e.put("doc", []byte("base"))
	if meta != nil {
		if err := c.SetMeta(e.ctx, a, meta); err != nil {
			t.Fatalf("SetMeta: %v", err)
		}
	}
	e.write(c, a, true, 0, []byte("local change"))
	c.mu.Lock()
	id := c.entries["doc"].Rec.ID
	c.mu.Unlock()
	if err := os.Chtimes(c.dataPath(id), e.mtime, e.mtime); err != nil {
		t.Fatal(err)
	}
	e.put("doc", []byte("remote change")) // another writer, meanwhile
	return e
}

// copies returns the conflict copies of doc in the bucket.
func (e *conflictEnv) copies() []transfer.ObjectAttrs {
	e.t.Helper()
	page, err := e.b.List(e.ctx, transfer.ListQuery{Prefix: "doc.bucketfs-conflict-"})
	if err != nil {
		e.t.Fatalf("List: %v", err)
	}
	return page.Objects
}

// A conflict copy whose upload took effect while its answer was lost is
// found by the next try (its upload ID, recorded with its name before it
// was sent) and confirmed: one copy, one conflict counted. It used to be
// made a second time, with the same bytes, under the next second's name.
func TestConflictCopyAnswerLostMadeOnce(t *testing.T) {
	e := newConflictEnv(t, nil)
	var lost, copies atomic.Int64
	e.emu.SetAnswerHook(func(r *http.Request, status int) int {
		if !isUpload(r) || status != http.StatusOK {
			return 0 // the upload at doc is refused (412): that answer arrives
		}
		copies.Add(1)
		if lost.Add(1) != 1 {
			return 0
		}
		return http.StatusServiceUnavailable
	})
	e.flush(e.c)
	got := e.copies()
	if len(got) != 1 {
		t.Fatalf("conflict copies %v, want one", got)
	}
	if data := string(e.object(got[0].Name)); data != "local change" {
		t.Errorf("%s = %q, want the local version", got[0].Name, data)
	}
	if n := e.c.Stats().Conflicts; n != 1 {
		t.Errorf("%d conflicts counted, want 1", n)
	}
	if n := copies.Load(); n != 1 {
		t.Errorf("the copy reached the bucket %d times, want once", n)
	}
	if !strings.Contains(e.log.String(), "conflict copy of this file from a try whose answer was lost") {
		t.Errorf("the copy found in the bucket was not logged:\n%s", e.log.String())
	}
	if _, dirty := e.c.Local("doc"); dirty {
		t.Error("doc is still a local change")
	}
	if data := string(e.object("doc")); data != "remote change" {
		t.Errorf("doc = %q, want the other writer's version", data)
	}
}

// A conflict copy carries what the upload at the name would have: the
// file's modification time (here only the cache file knows it), the
// custom metadata (mode, owner, extended attributes are kept there) and
// an upload ID. The time was missing: seen from another mount, the copy
// of a written file had the time of its upload.
func TestConflictCopyCarriesTimeAndMetadata(t *testing.T) {
	meta := map[string]string{"goog-reserved-posix-mode": "100600", "goog-reserved-posix-uid": "1234", "x": "y"}
	e := newConflictEnv(t, meta)
	e.flush(e.c)
	got := e.copies()
	if len(got) != 1 {
		t.Fatalf("conflict copies %v, want one", got)
	}
	md := got[0].Metadata
	if md[MtimeKey] != FormatMtime(e.mtime) {
		t.Errorf("the copy's %s = %q, want the local file's %q", MtimeKey, md[MtimeKey], FormatMtime(e.mtime))
	}
	for k, v := range meta {
		if md[k] != v {
			t.Errorf("the copy's metadata %s = %q, want %q", k, md[k], v)
		}
	}
	if md[AttemptKey] == "" {
		t.Error("the copy carries no upload ID")
	}
}
