package cache

import (
	"bytes"
	"testing"
)

// fetchEnv is a cache that fetches objects over two chunks by evidence,
// and one such object of 16 chunks.
func fetchEnv(t *testing.T) (*env, *Cache, []byte) {
	e := newEnv(t)
	o := e.opts(1 << 20)
	o.WholeMax = 2 * chunk
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return e, c, pattern(16*chunk, 7)
}

// A read of an object's last bytes (a footer) fetches the chunk it is
// in, and nothing more: not the object, not after the close. The open's
// check costs a byte.
func TestFetchFooterOnly(t *testing.T) {
	e, c, data := fetchEnv(t)
	a := e.put("big", data)
	h := e.openHandle(c, a)
	if err := h.Check(e.ctx); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if n, err := h.ReadAt(e.ctx, buf, int64(len(data)-100)); n != 100 || err != nil || !bytes.Equal(buf, data[len(data)-100:]) {
		t.Fatalf("footer read: %d, %v (right bytes: %v)", n, err, bytes.Equal(buf, data[len(data)-100:]))
	}
	h.Close() // retires the download: nothing goes on in the background
	f := c.Stats().Fetched
	if f.Read != chunk+1 || f.Readahead != 0 || f.Whole != 0 {
		t.Fatalf("fetched %+v; want read %d (the last chunk and the check's byte), nothing else", f, chunk+1)
	}
	if n := e.mediaReads("big"); n != 2 {
		t.Fatalf("%d range reads; want 2", n)
	}
}

// A handle reading in order fetches ahead of itself, then the whole
// object: every chunk once, and the copy is complete for the next open.
func TestFetchInOrderGoesWhole(t *testing.T) {
	e, c, data := fetchEnv(t)
	a := e.put("big", data)
	h := e.openHandle(c, a)
	if err := h.Check(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.mustReadAll(h, data)
	select { // a reader may have its bytes a moment before the last chunk counts as present
	case <-h.Download().Complete():
	case <-e.ctx.Done():
		t.Fatal("the download did not complete after a read of all of it")
	}
	if !h.Download().Started() { // promoted: its background walk started
		t.Error("a read in order of all of the object did not make it a whole fetch")
	}
	h.Close()
	// Bytes a reader came to wait for count as read, whatever fetched
	// them: a reader as fast as the walk waits for every chunk.
	f := c.Stats().Fetched
	if f.Read+f.Readahead+f.Whole != int64(len(data))+1 {
		t.Fatalf("fetched %+v; want %d bytes in all (each chunk once, and the check's byte)", f, len(data)+1)
	}
	if n := e.mediaReads("big"); n != 17 {
		t.Fatalf("%d range reads; want 17 (16 chunks and the check)", n)
	}
	h = e.openHandle(c, a)
	defer h.Close()
	if !h.Complete() {
		t.Fatal("the copy is not complete after a read in order of all of it")
	}
}

// Reads here and there fetch what they touch; once a quarter of the
// chunks are present, the rest is fetched too.
func TestFetchCoverageGoesWhole(t *testing.T) {
	e, c, data := fetchEnv(t)
	a := e.put("big", data)
	h := e.openHandle(c, a)
	defer h.Close()
	buf := make([]byte, 10)
	for _, i := range []int64{15, 11, 7, 3} { // none in order after the one before
		if _, err := h.ReadAt(e.ctx, buf, i*chunk); err != nil {
			t.Fatal(err)
		}
	}
	if f := c.Stats().Fetched; f.Whole != 0 || f.Readahead != 0 || f.Read != 4*chunk {
		t.Fatalf("after 4 reads of 4 chunks: fetched %+v; want read %d only", f, 4*chunk)
	}
	if _, err := h.ReadAt(e.ctx, buf, 9*chunk); err != nil { // 4 of 16 present: the rest is fetched
		t.Fatal(err)
	}
	select {
	case <-h.Download().Complete():
	case <-e.ctx.Done():
		t.Fatal("the copy did not complete after a quarter of it was read")
	}
	if f := c.Stats().Fetched; f.Whole == 0 || f.Read+f.Whole != int64(len(data)) {
		t.Fatalf("fetched %+v; want a whole fetch, %d bytes in all", f, len(data))
	}
}

// Objects up to WholeMax are fetched whole from the first read, as
// before; 'bucketfs warm' fetches a bigger one whole too.
func TestFetchSmallAndWarmWhole(t *testing.T) {
	e, c, data := fetchEnv(t)
	small := e.put("d/small", data[:2*chunk])
	h := e.openHandle(c, small)
	buf := make([]byte, 10)
	if _, err := h.ReadAt(e.ctx, buf, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Download().Complete():
	case <-e.ctx.Done():
		t.Fatal("an object of WholeMax bytes was not fetched whole")
	}
	h.Close()
	e.put("d/big", data)
	if _, err := c.Warm(e.ctx, []string{"d/big"}, WarmOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	if f := c.Stats().Fetched; f.Warm != int64(len(data)) {
		t.Fatalf("fetched %+v; want warm %d", f, len(data))
	}
}
