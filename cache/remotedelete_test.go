package cache

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// lockedBuffer is a log sink safe for the uploader's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A file changed here while it was deleted in the bucket: the change
// wins over the deletion. It is uploaded at its own name as a new object,
// with no conflict copy, and the log says the deletion was overridden
// (issue 22, item 4). Before, the local version went to a conflict name
// and the path was left empty.
func TestChangeOverridesRemoteDeletion(t *testing.T) {
	e := newEnv(t)
	o := e.opts(64 << 20)
	o.WriteBackDelay = time.Hour // nothing goes up until Flush
	var logs lockedBuffer
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	a := e.put("doc", []byte("base"))
	e.write(c, a, true, 0, []byte("local change"))
	if err := e.emu.Delete(bucketName, "doc"); err != nil { // someone else, meanwhile
		t.Fatal(err)
	}
	e.flush(c)
	if got := string(e.object("doc")); got != "local change" {
		t.Errorf("doc = %q, want the local change at its name", got)
	}
	page, err := e.b.List(e.ctx, transfer.ListQuery{Prefix: "doc.bucketfs-conflict-"})
	if err != nil || len(page.Objects) != 0 {
		t.Errorf("conflict copies %+v (%v), want none", page.Objects, err)
	}
	if s := c.Stats(); s.Conflicts != 0 || s.DirtyFiles != 0 {
		t.Errorf("stats %+v, want no conflict and nothing dirty", s)
	}
	if !strings.Contains(logs.String(), "the deletion is overridden") {
		t.Errorf("the log does not say the deletion was overridden:\n%s", logs.String())
	}

	// Deleted, then written again by someone else before the upload: a
	// change on both sides keeps both.
	a = e.put("two", []byte("base"))
	e.write(c, a, true, 0, []byte("mine"))
	if err := e.emu.Delete(bucketName, "two"); err != nil {
		t.Fatal(err)
	}
	e.put("two", []byte("theirs"))
	e.flush(c)
	if got := string(e.object("two")); got != "theirs" {
		t.Errorf("two = %q, want the other writer's version", got)
	}
	page, err = e.b.List(e.ctx, transfer.ListQuery{Prefix: "two.bucketfs-conflict-"})
	if err != nil || len(page.Objects) != 1 || string(e.object(page.Objects[0].Name)) != "mine" {
		t.Errorf("conflict copies %+v (%v), want one with the local version", page.Objects, err)
	}
}
