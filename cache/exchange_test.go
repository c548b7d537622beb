package cache

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// bucketNames lists every object name in the bucket.
func (e *env) bucketNames() []string {
	e.t.Helper()
	page, err := e.b.List(e.ctx, transfer.ListQuery{})
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, a := range page.Objects {
		names = append(names, a.Name)
	}
	return names
}

// TestExchange swaps a file never read with a new one not uploaded yet:
// after a crash right after the swap, each name has the other's content,
// and the flush puts them in the bucket so, with no conflict copy.
func TestExchange(t *testing.T) {
	e := newEnv(t)
	a := e.put("a", pattern(9000, 1))
	c := e.openWB(time.Hour)
	e.write(c, transfer.ObjectAttrs{Name: "n"}, true, 0, []byte("new, not uploaded"))
	n, _ := c.Local("n")
	if _, _, err := c.Exchange(e.ctx, a, n); err != nil {
		t.Fatal(err)
	}
	c.crash()
	// A restart sends the changes left at once: hold them back until
	// the names have been read.
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		return http.StatusServiceUnavailable, r.Method != http.MethodGet
	})
	c2 := e.openWB(time.Hour)
	e.mustHaveLocal(c2, map[string][]byte{"a": []byte("new, not uploaded"), "n": pattern(9000, 1)})
	e.emu.SetHook(nil)
	e.flush(c2)
	if got := e.object("a"); string(got) != "new, not uploaded" {
		t.Errorf("a in the bucket: %q", got)
	}
	if !bytes.Equal(e.object("n"), pattern(9000, 1)) {
		t.Error("n in the bucket is wrong")
	}
	if names := e.bucketNames(); strings.Join(names, ",") != "a,n" {
		t.Errorf("bucket holds %q, want a and n only", names)
	}
}

// TestExchangeDuringUpload swaps a file whose upload is on its way: the
// bucket version that upload makes is this cache's own (the new record
// is based on it once the upload ends, see supersededDuring), so the
// swapped content replaces it with no conflict copy.
func TestExchangeDuringUpload(t *testing.T) {
	e := newEnv(t)
	b := e.put("b", []byte("b in the bucket"))
	c := e.openWB(0)
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.emu.SetAfterHook(func(r *http.Request) {
		if isUpload(r) && r.URL.Query().Get("name") == "a" {
			once.Do(func() {
				close(arrived)
				<-release // the upload is made; its answer waits
			})
		}
	})
	e.write(c, transfer.ObjectAttrs{Name: "a"}, true, 0, []byte("a, uploading"))
	<-arrived
	la, _ := c.Local("a")
	_, _, err := c.Exchange(e.ctx, la, b) // while the upload's answer waits
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	e.flush(c)
	if got := e.object("a"); string(got) != "b in the bucket" {
		t.Errorf("a in the bucket: %q", got)
	}
	if got := e.object("b"); string(got) != "a, uploading" {
		t.Errorf("b in the bucket: %q", got)
	}
	if names := e.bucketNames(); strings.Join(names, ",") != "a,b" {
		t.Errorf("bucket holds %q, want a and b only", names)
	}
}
