package transfer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/crc32c"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// countingReaderAt counts the bytes read from it.
type countingReaderAt struct {
	r *bytes.Reader
	n atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// chunkSumsOf sums data chunk by chunk, as the cache's scan does.
func chunkSumsOf(data []byte, chunk int64) ChunkSums {
	s := ChunkSums{Chunk: chunk}
	for off := int64(0); off < int64(len(data)); off += chunk {
		s.Sums = append(s.Sums, crc32c.Checksum(data[off:min(off+chunk, int64(len(data)))]))
	}
	return s
}

func TestChunkSumsRange(t *testing.T) {
	data := testutil.Pattern(10<<10+17, 3)
	size := int64(len(data))
	s := chunkSumsOf(data, 1<<10)
	for _, c := range []struct {
		off, n int64
		ok     bool
	}{
		{0, size, true}, {0, 1 << 10, true}, {2 << 10, 3 << 10, true}, {10 << 10, 17, true},
		{1, 1 << 10, false}, {0, 1000, false}, {0, size + 1, false},
	} {
		got, ok := s.Range(c.off, c.n, size)
		if ok != c.ok || (ok && got != crc32c.Checksum(data[c.off:c.off+c.n])) {
			t.Errorf("Range(%d, %d) = %08x, %v; want ok %v and the bytes' CRC32C", c.off, c.n, got, ok, c.ok)
		}
	}
	if _, ok := (ChunkSums{Chunk: 1 << 10, Sums: s.Sums[1:]}).Range(0, 1<<10, size); ok {
		t.Errorf("Range with too few sums for the size said ok")
	}
}

// A parallel upload with the caller's chunk sums reads every byte of the
// file once: to send it. Before, each part was read once more for its
// checksum (the compose path's CRC32C, the XML path's Content-MD5).
func TestParallelReadsOnceWithChunkSums(t *testing.T) {
	emu := startEmulator(t)
	b := newTestGCS(t, emu)
	ctx := testutil.Ctx(t, 60*time.Second)
	data := testutil.Pattern(3*MinPartSize+4321, 21)
	// A type given: none would be sniffed from the first 512 bytes.
	o := PutOptions{IfGenerationMatch: 0, CRC32C: crc32c.Checksum(data), SendCRC32C: true, ContentType: "application/octet-stream"}
	for _, path := range []string{"xml", "compose"} {
		po := ParallelOptions{PartSize: MinPartSize, Parallelism: 4}
		if path == "xml" {
			po.Multipart = newMemMultipart(b)
		}
		p := newParallel(t, b, po)
		// Chunks of 2 MiB: parts are raised to a whole number of them.
		o.Chunks = chunkSumsOf(data, 2<<20)
		src := &countingReaderAt{r: bytes.NewReader(data)}
		staging := NewStaging()
		if _, err := p.Put(ctx, path, src, int64(len(data)), o, staging); err != nil {
			t.Fatalf("%s: Put: %v", path, err)
		}
		if got, err := readAll(ctx, b, path); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: the object holds %d bytes (err %v), want the %d sent", path, len(got), err, len(data))
		}
		if n := src.n.Load(); n != int64(len(data)) {
			t.Errorf("%s: %d bytes read from the file, want %d (each once)", path, n, len(data))
		}
		if err := p.Clean(ctx, staging); err != nil {
			t.Fatal(err)
		}
	}
}

// A part whose chunk sums are not its bytes (the file changed after the
// scan) is refused by the store: the upload fails with ErrChecksum and
// the object is not made.
func TestParallelStaleChunkSums(t *testing.T) {
	emu := startEmulator(t)
	b := newTestGCS(t, emu)
	ctx := testutil.Ctx(t, 60*time.Second)
	data := testutil.Pattern(3*MinPartSize, 22)
	for _, path := range []string{"xml", "compose"} {
		po := ParallelOptions{PartSize: MinPartSize, Parallelism: 4}
		if path == "xml" {
			po.Multipart = newMemMultipart(b)
		}
		p := newParallel(t, b, po)
		o := PutOptions{IfGenerationMatch: 0, CRC32C: crc32c.Checksum(data), SendCRC32C: true, Chunks: chunkSumsOf(data, 1<<20)}
		changed := bytes.Clone(data)
		changed[MinPartSize+5] ^= 1
		staging := NewStaging()
		_, err := p.Put(ctx, path, bytes.NewReader(changed), int64(len(changed)), o, staging)
		if !errors.Is(err, ErrChecksum) {
			t.Errorf("%s: Put of bytes that are not the summed ones: %v, want ErrChecksum", path, err)
		}
		if _, err := b.Stat(ctx, path); !errors.Is(err, ErrNotExist) {
			t.Errorf("%s: the refused upload made the object (Stat: %v)", path, err)
		}
		if err := p.Clean(ctx, staging); err != nil {
			t.Fatal(err)
		}
	}
}

// The compose into place carries the whole file's CRC32C: parts that do
// not add up to it never become the object. Before, the composed object
// was checked after it was live.
func TestParallelComposedWrongWholeSum(t *testing.T) {
	emu := startEmulator(t)
	b := newTestGCS(t, emu)
	ctx := testutil.Ctx(t, 60*time.Second)
	p := newParallel(t, b, ParallelOptions{PartSize: 1 << 10})
	data := testutil.Pattern(10<<10, 23)
	staging := NewStaging()
	_, err := p.Put(ctx, "obj", bytes.NewReader(data), int64(len(data)), PutOptions{IfGenerationMatch: 0, CRC32C: crc32c.Checksum(data) + 1, SendCRC32C: true}, staging)
	if !errors.Is(err, ErrChecksum) {
		t.Errorf("Put with a whole-file CRC32C its parts do not have: %v, want ErrChecksum", err)
	}
	if _, err := b.Stat(ctx, "obj"); !errors.Is(err, ErrNotExist) {
		t.Errorf("the refused upload made the object (Stat: %v)", err)
	}
	if err := p.Clean(ctx, staging); err != nil {
		t.Fatal(err)
	}
}

// Compose sends o.CRC32C: the store (the emulator, as GCS) refuses an
// assembly whose bytes do not have it, and writes nothing.
func TestComposeSendsCRC32C(t *testing.T) {
	emu := startEmulator(t)
	b := newTestGCS(t, emu)
	ctx := testutil.Ctx(t, 30*time.Second)
	a, c := []byte("first half,"), []byte(" second half")
	for name, body := range map[string][]byte{"a": a, "c": c} {
		if _, err := b.Put(ctx, name, bytes.NewReader(body), PutOptions{Unconditional: true}); err != nil {
			t.Fatal(err)
		}
	}
	whole := crc32c.Checksum(append(bytes.Clone(a), c...))
	_, err := b.Compose(ctx, "dst", []string{"a", "c"}, PutOptions{IfGenerationMatch: 0, CRC32C: whole + 1, SendCRC32C: true})
	if err == nil {
		t.Errorf("Compose with a wrong CRC32C succeeded")
	}
	if _, err := b.Stat(ctx, "dst"); !errors.Is(err, ErrNotExist) {
		t.Errorf("the refused compose made the object (Stat: %v)", err)
	}
	got, err := b.Compose(ctx, "dst", []string{"a", "c"}, PutOptions{IfGenerationMatch: 0, CRC32C: whole, SendCRC32C: true})
	if err != nil || got.CRC32C != whole {
		t.Errorf("Compose with the right CRC32C = %+v, %v", got, err)
	}
}

// UploadPart reads its source once (to send it): the checksum comes from
// the caller, not from a read of its own.
func TestUploadPartReadsOnce(t *testing.T) {
	t.Parallel()
	f := &fakeXMLAPI{}
	m := f.serve(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("ETag", `"e"`)
	})
	ctx := testutil.Ctx(t, 10*time.Second)
	data := testutil.Pattern(1<<20, 24)
	src := &countingReaderAt{r: bytes.NewReader(data)}
	if _, err := m.UploadPart(ctx, "o", "id", 1, src, int64(len(data)), crc32c.Checksum(data)); err != nil {
		t.Fatal(err)
	}
	if n := src.n.Load(); n != int64(len(data)) {
		t.Errorf("%d bytes read, want %d", n, len(data))
	}
}

// An S3-compatible server checks the part against x-amz-checksum-crc32c:
// a part whose bytes are not the summed ones is refused with ErrChecksum.
// (GCS's x-goog-hash is checked on the wire only, by TestMultipartWire:
// no GCS here.)
func TestMultipartPartChecksumRefused(t *testing.T) {
	t.Parallel()
	s := needS3(t)
	ctx := testutil.Ctx(t, time.Minute)
	m := s.multipart(t, s3Bucket, s3SecretKey)
	name := objName(t, "sum.bin")
	id, err := m.Initiate(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Abort(context.Background(), name, id)
	data := randomBytes(t, 1<<20)
	if _, err := m.UploadPart(ctx, name, id, 1, bytes.NewReader(data), int64(len(data)), crc32c.Checksum(data)^1); !errors.Is(err, ErrChecksum) {
		t.Errorf("UploadPart with a wrong CRC32C: %v, want ErrChecksum", err)
	}
	if _, err := m.UploadPart(ctx, name, id, 1, bytes.NewReader(data), int64(len(data)), crc32c.Checksum(data)); err != nil {
		t.Errorf("UploadPart with the right CRC32C: %v", err)
	}
}

// In a bucket with a hierarchical namespace, Clean deletes the upload's
// staging folder too: deleting its objects leaves it there.
func TestParallelCleanDeletesStagingFolder(t *testing.T) {
	emu := startEmulator(t)
	emu.SetHierarchical(bucketName, true)
	b := newTestGCS(t, emu)
	ctx := testutil.Ctx(t, 60*time.Second)
	p := newParallel(t, b, ParallelOptions{PartSize: 1 << 10})
	data := testutil.Pattern(40<<10, 25)
	staging := NewStaging()
	if _, err := p.Put(ctx, "obj", bytes.NewReader(data), int64(len(data)), PutOptions{IfGenerationMatch: 0}, staging); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := p.Clean(ctx, staging); err != nil {
		t.Fatalf("Clean: %v", err)
	}
	for _, f := range emu.Folders(bucketName) {
		if f == staging {
			t.Errorf("the staging folder %s is left after Clean (folders: %v)", staging, emu.Folders(bucketName))
		}
	}
}

// A bucket with a default event-based hold says so (DeletionRules), and
// with NoStaging a large file goes up as one resumable upload: nothing is
// staged that the hold would keep.
func TestNoStagingWhereDeletesAreHeld(t *testing.T) {
	emu := startEmulator(t)
	emu.Fake().CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "held-bucket", DefaultEventBasedHold: true})
	ctx := testutil.Ctx(t, 60*time.Second)
	held, err := NewGCS(ctx, "held-bucket", GCSOptions{Endpoint: emu.URL(), Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
	if r, err := held.DeletionRules(ctx); err != nil || !r.HoldsDeletes() || !r.DefaultEventBasedHold {
		t.Errorf("DeletionRules of a bucket with a default event-based hold = %+v, %v", r, err)
	}
	if r, err := newTestGCS(t, emu).DeletionRules(ctx); err != nil || r.HoldsDeletes() {
		t.Errorf("DeletionRules of a plain bucket = %+v, %v", r, err)
	}
	var staged, resumable atomic.Int64
	emu.SetHook(func(r *http.Request) (int, bool) {
		if strings.Contains(r.URL.String(), "bucketfs-staging") {
			staged.Add(1)
		}
		if r.URL.Query().Get("uploadType") == "resumable" {
			resumable.Add(1)
		}
		return 0, false
	})
	p := newParallel(t, held, ParallelOptions{PartSize: 1 << 10, NoStaging: true})
	data := testutil.Pattern(resumableChunk+40<<10, 26) // one chunk would be sent in one request
	a, err := p.Put(ctx, "obj", bytes.NewReader(data), int64(len(data)), PutOptions{IfGenerationMatch: 0, CRC32C: crc32c.Checksum(data), SendCRC32C: true}, NewStaging())
	if err != nil || a.Size != int64(len(data)) {
		t.Fatalf("Put = %+v, %v", a, err)
	}
	if got, err := readAll(ctx, held, "obj"); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the object holds %d bytes (%v), want the %d sent", len(got), err, len(data))
	}
	if n := staged.Load(); n != 0 {
		t.Errorf("%d requests named the staging prefix, want none", n)
	}
	if resumable.Load() == 0 {
		t.Errorf("no resumable upload session was started")
	}
}
