package integration

import (
	"bytes"
	"compress/gzip"
	"os"
	"testing"

	"github.com/bucketfs/bucketfs/internal/testutil"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"golang.org/x/sys/unix"
)

// A file uploaded in parts (12 MiB: over the test's 8 MiB
// --parallel-upload-threshold, three parts of 5 MiB or less) is the same
// object as one uploaded in one request (1 MiB): the content
// type detected from its bytes, its extended attributes in the metadata;
// and a gzip-encoded object changed in place keeps its Content-Encoding
// at either size. Before, the compose into place dropped the encoding
// and left the type unset.
func TestLargeFileSameObjectAsSmall(t *testing.T) {
	const largeSize = 12 << 20
	emu := startEmulator(t, nil)
	gz := func(n int, seed uint64) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.NoCompression)
		zw.Write(testutil.RandomBytes(n, seed))
		zw.Close()
		return buf.Bytes()
	}
	for _, name := range []string{"small.gz", "large.gz"} {
		size := 1 << 20
		if name == "large.gz" {
			size = largeSize
		}
		emu.Fake().CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: testBucket, Name: name, ContentEncoding: "gzip", ContentType: "application/x-tar"}, Content: gz(size, uint64(len(name)))})
	}
	m := mount(t, emu, mountOpts{args: []string{"--parallel-upload-threshold", "8MiB", "--part-size", "5MiB", "--write-back-delay", "0"}})
	html := []byte("<!DOCTYPE html><html><body>")
	for name, size := range map[string]int{"small.html": 1 << 20, "large.html": largeSize} {
		data := append(bytes.Clone(html), bytes.Repeat([]byte("<p>x</p>"), (size-len(html))/8)...)
		if err := os.WriteFile(m.path(name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := unix.Setxattr(m.path(name), "user.tag", []byte("blue"), 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"small.gz", "large.gz"} {
		f, err := os.OpenFile(m.path(name), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Write([]byte("tail"))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	m.unmount(t)
	attrs := func(name string) fakestorage.Object {
		o, err := emu.Object(testBucket, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return o
	}
	small, large := attrs("small.html"), attrs("large.html")
	if small.ContentType != "text/html; charset=utf-8" || large.ContentType != small.ContentType {
		t.Errorf("content type: 1 MiB file %q, 12 MiB file %q; want text/html; charset=utf-8 for both", small.ContentType, large.ContentType)
	}
	if small.Metadata["bucketfs-xattr-tag"] != "t:blue" || large.Metadata["bucketfs-xattr-tag"] != "t:blue" {
		t.Errorf("metadata: 1 MiB file %v, 12 MiB file %v; want bucketfs-xattr-tag t:blue in both", small.Metadata, large.Metadata)
	}
	for _, name := range []string{"small.gz", "large.gz"} {
		o := attrs(name)
		if o.ContentEncoding != "gzip" || !bytes.HasSuffix(o.Content, []byte("tail")) {
			t.Errorf("%s after a change: encoding %q, ends in the change %v; want gzip and true", name, o.ContentEncoding, bytes.HasSuffix(o.Content, []byte("tail")))
		}
	}
}
