package transfer

import (
	"bytes"
	"compress/gzip"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// TestGzipObjectReadAsStored: an object stored gzip-encoded reads as its
// stored bytes, at its size, with its checksum, through a download that
// asks for StoredBytes, in several chunks and whole; and an upload can
// keep its Content-Encoding.
func TestGzipObjectReadAsStored(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(testutil.Pattern(50000, 7))
	zw.Close()
	stored := zb.Bytes()
	emu.Fake().CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: bucketName, Name: "z", ContentEncoding: "gzip"}, Content: stored})
	ctx := testutil.Ctx(t, 30*time.Second)
	a, err := g.Stat(ctx, "z")
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != int64(len(stored)) || a.ContentEncoding != "gzip" {
		t.Fatalf("stat: size %d, encoding %q; want %d, gzip", a.Size, a.ContentEncoding, len(stored))
	}
	for _, chunk := range []int64{testChunk, 1 << 20} {
		dst := newMemFile(int(a.Size), 0)
		d := NewDownload(g, "z", a.Generation, a.Size, dst, nil, DownloadOptions{ChunkSize: chunk, Parallelism: 2, CRC32C: a.CRC32C, CheckCRC: true, StoredBytes: true})
		err := d.EnsureComplete(ctx)
		d.Stop()
		if err != nil {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		if !bytes.Equal(dst.bytes(0, a.Size), stored) {
			t.Fatalf("chunk %d: the bytes read are not the stored ones", chunk)
		}
	}
	b, err := g.Put(ctx, "z2", bytes.NewReader(stored), PutOptions{ContentEncoding: "gzip"})
	if err != nil {
		t.Fatal(err)
	}
	if b.ContentEncoding != "gzip" || b.CRC32C != a.CRC32C {
		t.Errorf("upload kept encoding %q, crc %08x; want gzip, %08x", b.ContentEncoding, b.CRC32C, a.CRC32C)
	}
}
