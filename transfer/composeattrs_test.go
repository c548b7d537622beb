package transfer

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/crc32c"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// An object uploaded in parts carries what a single upload of the same
// bytes carries: Content-Encoding, the content type (given, or sniffed
// the same way), custom metadata. Before, the compose into place dropped
// the encoding and left a sniffable type unset. 1 MiB and 64 MiB files of
// each kind, on the compose path (the emulator's) and, at 1 MiB, the XML
// path (memMultipart).
func TestParallelKeepsSingleUploadAttrs(t *testing.T) {
	emu := startEmulator(t)
	b := newTestGCS(t, emu)
	ctx := testutil.Ctx(t, 5*time.Minute)
	html := func(n int) []byte {
		return append([]byte("<!DOCTYPE html><html><body>"), bytes.Repeat([]byte("<p>bucketfs</p>"), n/15)...)
	}
	gz := func(n int) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.NoCompression) // stays about n bytes
		zw.Write(testutil.Pattern(n, 31))
		zw.Close()
		return buf.Bytes()
	}
	kinds := []struct {
		name string
		body func(n int) []byte
		o    PutOptions
	}{
		{"gzip", gz, PutOptions{ContentEncoding: "gzip"}},
		{"sniffed", html, PutOptions{}},
		{"typed", html, PutOptions{ContentType: "text/csv"}},
		{"metadata", func(n int) []byte { return testutil.Pattern(n, 32) }, PutOptions{Metadata: map[string]string{"bucketfs-mode": "640", "bucketfs-xattr-user.tag": "t:blue"}}},
	}
	for _, size := range []int{1 << 20, 64 << 20} {
		for _, k := range kinds {
			for _, path := range []string{"compose", "xml"} {
				if path == "xml" && size > 1<<20 {
					continue
				}
				t.Run(fmt.Sprintf("%s-%dMiB-%s", k.name, size>>20, path), func(t *testing.T) {
					data := k.body(size)
					o := k.o
					o.Unconditional, o.CRC32C, o.SendCRC32C = true, crc32c.Checksum(data), true
					single, err := b.Put(ctx, "single-"+k.name, bytes.NewReader(data), o)
					if err != nil {
						t.Fatalf("Put: %v", err)
					}
					po := ParallelOptions{PartSize: 1 << 10}
					if path == "xml" {
						po.Multipart = newMemMultipart(b)
					}
					p := newParallel(t, b, po)
					staging := NewStaging()
					parts, err := p.Put(ctx, "parts-"+k.name, bytes.NewReader(data), int64(len(data)), o, staging)
					if err != nil {
						t.Fatalf("parallel Put: %v", err)
					}
					if err := p.Clean(ctx, staging); err != nil {
						t.Fatal(err)
					}
					parts, err = b.Stat(ctx, "parts-"+k.name)
					if err != nil {
						t.Fatal(err)
					}
					if parts.ContentType != single.ContentType || parts.ContentEncoding != single.ContentEncoding ||
						!maps.Equal(parts.Metadata, single.Metadata) || parts.Size != single.Size || parts.CRC32C != single.CRC32C {
						t.Errorf("in parts: type %q, encoding %q, metadata %v, %d bytes, CRC32C %08x\nin one request: type %q, encoding %q, metadata %v, %d bytes, CRC32C %08x",
							parts.ContentType, parts.ContentEncoding, parts.Metadata, parts.Size, parts.CRC32C,
							single.ContentType, single.ContentEncoding, single.Metadata, single.Size, single.CRC32C)
					}
					if single.ContentType == "" || (k.o.ContentEncoding != "" && single.ContentEncoding != k.o.ContentEncoding) {
						t.Errorf("the single upload has type %q, encoding %q: the comparison shows nothing", single.ContentType, single.ContentEncoding)
					}
				})
			}
		}
	}
}
