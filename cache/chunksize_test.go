package cache

import (
	"fmt"
	"net/http"
	"testing"
)

// TestChunkSizeChangeRecordsNoOldChunks: after a remount with another
// chunk size, a record written before the new download is retired (here
// a metadata change, then a crash) must not name the chunks present in
// the old size's units: read in the new one's, they cover bytes never
// fetched, and the next start serves the file's holes as the object.
// (Fixed in a70d528: fetch.Fetcher.Make clears the record's present
// chunks with its sums.)
func TestChunkSizeChangeRecordsNoOldChunks(t *testing.T) {
	e := newEnv(t)
	data := pattern(objSize, 9)
	a := e.put("obj", data)
	refuseFrom := func(from int64) {
		e.emu.SetHook(func(r *http.Request) (int, bool) {
			var start int64
			if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-", &start); err == nil && start >= from {
				return http.StatusForbidden, true
			}
			return 0, false
		})
	}
	refuseFrom(5 * chunk)
	c := e.open(1 << 20)
	h := e.openHandle(c, a)
	buf := make([]byte, 5*chunk)
	if n, err := h.ReadAt(e.ctx, buf, 0); err != nil || n != len(buf) {
		t.Fatalf("reading the first 5 chunks = %d, %v", n, err)
	}
	h.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// Chunks four times as large, and nothing fetched: the record's 5
	// chunks present would be the whole object in the new units.
	refuseFrom(0)
	o := e.opts(1 << 20)
	o.ChunkSize = 4 * chunk
	c2, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := c2.Open(e.ctx, a) // makes the download; left open: not retired
	if err != nil {
		t.Fatal(err)
	}
	_ = h2
	if err := c2.SetMeta(e.ctx, a, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	c2.crash()

	e.emu.SetHook(nil)
	c3, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	h3, err := c3.Open(e.ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer h3.Close()
	e.mustReadAll(h3, data)
}
