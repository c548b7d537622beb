package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"github.com/bucketfs/bucketfs/internal/testutil/testemu"
)

// The tests of this package talk to an in-process GCS emulator over HTTP.
// testBucket is a conformance suite for the Bucket contract (bucket.go):
// every implementation and decorator should pass it.

const bucketName = "test-bucket"

// startEmulator runs an emulator holding the empty bucket bucketName.
func startEmulator(t *testing.T) *emulator.Server {
	return testemu.Start(t, emulator.Options{Buckets: []string{bucketName}})
}

// newTestGCS returns a *GCS for bucketName of emu.
func newTestGCS(t *testing.T, emu *emulator.Server) *GCS {
	t.Helper()
	g, err := NewGCS(testutil.Ctx(t, 30*time.Second), bucketName, GCSOptions{Endpoint: emu.URL(), Anonymous: true})
	if err != nil {
		t.Fatalf("NewGCS: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// put stores data as object name of bucketName and returns its generation.
func put(t *testing.T, emu *emulator.Server, name string, data []byte) int64 {
	t.Helper()
	return testemu.Put(t, emu, bucketName, name, data)
}

// isMediaRead reports whether r downloads object bytes (JSON API reads, as
// GCS uses them).
func isMediaRead(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	p := r.URL.EscapedPath()
	return strings.HasPrefix(p, "/download/storage/v1/b/") ||
		strings.HasPrefix(p, "/storage/v1/b/") && strings.Contains(p, "/o/") && r.URL.Query().Get("alt") == "media"
}

// rangeStart returns the first byte asked for by r's Range header, or -1.
func rangeStart(r *http.Request) int64 {
	var start int64
	if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-", &start); err != nil {
		return -1
	}
	return start
}

// readAll reads the whole live version of name through b.
func readAll(ctx context.Context, b Bucket, name string) ([]byte, error) {
	a, err := b.Stat(ctx, name)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	n, err := b.ReadRange(ctx, name, a.Generation, 0, a.Size, &buf)
	if err != nil {
		return nil, err
	}
	if n != a.Size {
		return nil, fmt.Errorf("read %d bytes of %s, want %d", n, name, a.Size)
	}
	return buf.Bytes(), nil
}

func TestGCSConformance(t *testing.T) {
	testBucket(t, func(t *testing.T) (Bucket, *emulator.Server) {
		emu := startEmulator(t)
		return newTestGCS(t, emu), emu
	})
}

func TestLimitedConformance(t *testing.T) {
	testBucket(t, func(t *testing.T) (Bucket, *emulator.Server) {
		emu := startEmulator(t)
		return NewLimited(newTestGCS(t, emu), 2), emu
	})
}

// testBucket runs the Bucket conformance suite. newBucket returns a bucket
// named bucketName served by a fresh emulator, whose bucket is empty.
func testBucket(t *testing.T, newBucket func(t *testing.T) (Bucket, *emulator.Server)) {
	t.Run("Name", func(t *testing.T) {
		b, _ := newBucket(t)
		if got := b.Name(); got != bucketName {
			t.Errorf("Name() = %q, want %q", got, bucketName)
		}
	})
	t.Run("StatExisting", func(t *testing.T) {
		b, emu := newBucket(t)
		data := testutil.Pattern(1234, 1)
		gen := put(t, emu, "dir/a.txt", data)
		a, err := b.Stat(testutil.Ctx(t, 30*time.Second), "dir/a.txt")
		if err != nil {
			t.Fatalf("Stat: %v", err)
		}
		if a.Name != "dir/a.txt" || a.Size != int64(len(data)) || a.Generation != gen {
			t.Errorf("Stat = {Name:%q Size:%d Generation:%d}, want {Name:%q Size:%d Generation:%d}",
				a.Name, a.Size, a.Generation, "dir/a.txt", len(data), gen)
		}
		if a.Updated.IsZero() {
			t.Errorf("Stat: Updated is zero")
		}
	})
	t.Run("StatMissing", func(t *testing.T) {
		b, _ := newBucket(t)
		_, err := b.Stat(testutil.Ctx(t, 30*time.Second), "no/such/object")
		if !errors.Is(err, ErrNotExist) {
			t.Fatalf("Stat of a missing object: err = %v, want ErrNotExist", err)
		}
		var oe *OpError
		if !errors.As(err, &oe) {
			t.Fatalf("Stat of a missing object: err = %v (%T), want an *OpError", err, err)
		}
		if oe.Op != "stat" || oe.Bucket != bucketName || oe.Object != "no/such/object" {
			t.Errorf("OpError = {Op:%q Bucket:%q Object:%q}, want {stat test-bucket no/such/object}", oe.Op, oe.Bucket, oe.Object)
		}
		if !strings.Contains(err.Error(), "gs://test-bucket/no/such/object") {
			t.Errorf("error text %q does not name gs://test-bucket/no/such/object", err)
		}
	})
	t.Run("ListDelimiter", func(t *testing.T) {
		b, emu := newBucket(t)
		for _, name := range []string{"top.txt", "dir/", "dir/a", "dir/b", "dir/sub/c", "other/x"} {
			put(t, emu, name, []byte(name))
		}
		tests := []struct {
			q        ListQuery
			objects  []string
			prefixes []string
		}{
			{ListQuery{Delimiter: "/"}, []string{"top.txt"}, []string{"dir/", "other/"}},
			{ListQuery{Prefix: "dir/", Delimiter: "/"}, []string{"dir/", "dir/a", "dir/b"}, []string{"dir/sub/"}},
			{ListQuery{Prefix: "dir/sub/", Delimiter: "/"}, []string{"dir/sub/c"}, nil},
			{ListQuery{Prefix: "dir/"}, []string{"dir/", "dir/a", "dir/b", "dir/sub/c"}, nil},
			{ListQuery{Prefix: "nothing/", Delimiter: "/"}, nil, nil},
			// Placeholders of the prefixes come along ("other/" has none).
			{ListQuery{Delimiter: "/", Placeholders: true}, []string{"dir/", "top.txt"}, []string{"dir/", "other/"}},
			{ListQuery{Prefix: "dir/", Delimiter: "/", Placeholders: true}, []string{"dir/", "dir/a", "dir/b"}, []string{"dir/sub/"}},
		}
		ctx := testutil.Ctx(t, 30*time.Second)
		for _, tt := range tests {
			page, err := b.List(ctx, tt.q)
			if err != nil {
				t.Errorf("List(%+v): %v", tt.q, err)
				continue
			}
			var objects []string
			for _, o := range page.Objects {
				objects = append(objects, o.Name)
				if o.Generation == 0 || o.Size != int64(len(o.Name)) {
					t.Errorf("List(%+v): object %q has Generation %d, Size %d", tt.q, o.Name, o.Generation, o.Size)
				}
			}
			sort.Strings(objects)
			prefixes := slices.Sorted(slices.Values(page.Prefixes))
			if !slices.Equal(objects, tt.objects) || !slices.Equal(prefixes, tt.prefixes) {
				t.Errorf("List(%+v) = objects %q, prefixes %q; want objects %q, prefixes %q",
					tt.q, objects, prefixes, tt.objects, tt.prefixes)
			}
			if page.NextPageToken != "" {
				t.Errorf("List(%+v): NextPageToken = %q on a single page", tt.q, page.NextPageToken)
			}
		}
	})
	t.Run("ListPagination", func(t *testing.T) {
		b, emu := newBucket(t)
		var want []string
		for i := range 5 {
			name := fmt.Sprintf("p/%d", i)
			put(t, emu, name, []byte{byte(i)})
			want = append(want, name)
		}
		put(t, emu, "q/outside", []byte("x"))
		ctx := testutil.Ctx(t, 30*time.Second)
		seen := map[string]int{}
		q := ListQuery{Prefix: "p/", PageSize: 2}
		pages := 0
		for {
			pages++
			if pages > 10 {
				t.Fatalf("listing did not end after 10 pages of 2 (names seen: %v)", seen)
			}
			page, err := b.List(ctx, q)
			if err != nil {
				t.Fatalf("List page %d: %v", pages, err)
			}
			if n := len(page.Objects) + len(page.Prefixes); n > 2 {
				t.Errorf("page %d has %d entries, want at most PageSize 2", pages, n)
			}
			for _, o := range page.Objects {
				seen[o.Name]++
			}
			if page.NextPageToken == "" {
				break
			}
			q.PageToken = page.NextPageToken
		}
		if pages < 3 {
			t.Errorf("5 names in pages of 2 came in %d pages, want at least 3", pages)
		}
		var got []string
		for name, n := range seen {
			got = append(got, name)
			if n != 1 {
				t.Errorf("%s listed %d times, want once", name, n)
			}
		}
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Errorf("pagination listed %q, want %q", got, want)
		}
	})
	t.Run("ReadRange", func(t *testing.T) {
		b, emu := newBucket(t)
		data := testutil.Pattern(1000, 2)
		gen := put(t, emu, "obj", data)
		tests := []struct {
			name        string
			gen         int64
			off, length int64
			want        []byte
		}{
			{"whole", gen, 0, 1000, data},
			{"middle", gen, 100, 250, data[100:350]},
			{"one byte at the end", gen, 999, 1, data[999:]},
			{"past the end gives a short count", gen, 900, 500, data[900:]},
			{"live generation (0)", 0, 10, 20, data[10:30]},
		}
		ctx := testutil.Ctx(t, 30*time.Second)
		for _, tt := range tests {
			var buf bytes.Buffer
			n, err := b.ReadRange(ctx, "obj", tt.gen, tt.off, tt.length, &buf)
			if err != nil {
				t.Errorf("%s: ReadRange(gen %d, off %d, len %d): %v", tt.name, tt.gen, tt.off, tt.length, err)
				continue
			}
			if n != int64(len(tt.want)) || !bytes.Equal(buf.Bytes(), tt.want) {
				t.Errorf("%s: ReadRange(off %d, len %d) = %d bytes (buffer %d), want %d matching bytes",
					tt.name, tt.off, tt.length, n, buf.Len(), len(tt.want))
			}
		}
	})
	t.Run("ReadRangeOldGeneration", func(t *testing.T) {
		b, emu := newBucket(t)
		old := put(t, emu, "obj", testutil.Pattern(100, 3))
		cur := put(t, emu, "obj", testutil.Pattern(100, 4))
		ctx := testutil.Ctx(t, 30*time.Second)
		var buf bytes.Buffer
		_, err := b.ReadRange(ctx, "obj", old, 0, 100, &buf)
		if !errors.Is(err, ErrNotExist) || !IsStale(err) {
			t.Errorf("ReadRange of overwritten generation: err = %v, want ErrNotExist", err)
		}
		var oe *OpError
		if !errors.As(err, &oe) || oe.Op != "read" || oe.Object != "obj" {
			t.Errorf("ReadRange of overwritten generation: err = %#v, want an *OpError{Op: read, Object: obj}", err)
		}
		buf.Reset()
		if n, err := b.ReadRange(ctx, "obj", cur, 0, 100, &buf); err != nil || n != 100 || !bytes.Equal(buf.Bytes(), testutil.Pattern(100, 4)) {
			t.Errorf("ReadRange of live generation = %d, %v; want 100 bytes of the new content", n, err)
		}
	})
	t.Run("ReadRangeMissing", func(t *testing.T) {
		b, _ := newBucket(t)
		var buf bytes.Buffer
		_, err := b.ReadRange(testutil.Ctx(t, 30*time.Second), "missing", 0, 0, 10, &buf)
		if !errors.Is(err, ErrNotExist) {
			t.Errorf("ReadRange of a missing object: err = %v, want ErrNotExist", err)
		}
	})
	t.Run("ReadRangeWriterError", func(t *testing.T) {
		b, emu := newBucket(t)
		put(t, emu, "obj", testutil.Pattern(1000, 5))
		werr := errors.New("disk full")
		_, err := b.ReadRange(testutil.Ctx(t, 30*time.Second), "obj", 0, 0, 1000, failingWriter{werr})
		if !errors.Is(err, werr) {
			t.Errorf("ReadRange into a failing writer: err = %v, want the writer's error", err)
		}
		if errors.Is(err, ErrNotExist) || errors.Is(err, ErrPermission) {
			t.Errorf("ReadRange into a failing writer: err = %v is classified as a bucket error", err)
		}
	})
	t.Run("PutDoesNotExistCondition", func(t *testing.T) {
		b, emu := newBucket(t)
		ctx := testutil.Ctx(t, 30*time.Second)
		a, err := b.Put(ctx, "new", bytes.NewReader([]byte("first")), PutOptions{IfGenerationMatch: 0, ContentType: "text/plain"})
		if err != nil {
			t.Fatalf("Put of a new object with IfGenerationMatch 0: %v", err)
		}
		if a.Name != "new" || a.Size != 5 || a.Generation == 0 {
			t.Errorf("Put returned %+v, want Name new, Size 5, a generation", a)
		}
		_, err = b.Put(ctx, "new", bytes.NewReader([]byte("second")), PutOptions{IfGenerationMatch: 0})
		if !errors.Is(err, ErrPrecondition) {
			t.Errorf("Put with IfGenerationMatch 0 on an existing object: err = %v, want ErrPrecondition", err)
		}
		if got, err := readAll(ctx, b, "new"); err != nil || string(got) != "first" {
			t.Errorf("after the refused Put the object holds %q (err %v), want %q", got, err, "first")
		}
		if g, _ := emu.Generation(bucketName, "new"); g != a.Generation {
			t.Errorf("after the refused Put the generation is %d, want %d", g, a.Generation)
		}
	})
	t.Run("PutGenerationMatch", func(t *testing.T) {
		b, emu := newBucket(t)
		ctx := testutil.Ctx(t, 30*time.Second)
		old := put(t, emu, "obj", []byte("old"))
		_, err := b.Put(ctx, "obj", bytes.NewReader([]byte("wrong")), PutOptions{IfGenerationMatch: old + 12345})
		if !errors.Is(err, ErrPrecondition) {
			t.Errorf("Put with a wrong generation: err = %v, want ErrPrecondition", err)
		}
		a, err := b.Put(ctx, "obj", bytes.NewReader([]byte("new content")), PutOptions{IfGenerationMatch: old, Metadata: map[string]string{"k": "v"}})
		if err != nil {
			t.Fatalf("Put with the live generation: %v", err)
		}
		if a.Generation == old || a.Generation == 0 {
			t.Errorf("Put returned generation %d, want a new one (old %d)", a.Generation, old)
		}
		st, err := b.Stat(ctx, "obj")
		if err != nil {
			t.Fatalf("Stat: %v", err)
		}
		if st.Generation != a.Generation || st.Size != int64(len("new content")) || st.Metadata["k"] != "v" {
			t.Errorf("Stat after Put = {Generation:%d Size:%d Metadata:%v}, want {%d %d map[k:v]}",
				st.Generation, st.Size, st.Metadata, a.Generation, len("new content"))
		}
		if got, err := readAll(ctx, b, "obj"); err != nil || string(got) != "new content" {
			t.Errorf("content after Put = %q (err %v), want %q", got, err, "new content")
		}
	})
	t.Run("PutUnconditional", func(t *testing.T) {
		b, emu := newBucket(t)
		ctx := testutil.Ctx(t, 30*time.Second)
		put(t, emu, "obj", []byte("old"))
		if _, err := b.Put(ctx, "obj", strings.NewReader("replaced"), PutOptions{Unconditional: true}); err != nil {
			t.Fatalf("unconditional Put over an existing object: %v", err)
		}
		if got, err := readAll(ctx, b, "obj"); err != nil || string(got) != "replaced" {
			t.Errorf("content after Put = %q (err %v), want %q", got, err, "replaced")
		}
	})
	t.Run("Delete", func(t *testing.T) {
		b, emu := newBucket(t)
		ctx := testutil.Ctx(t, 30*time.Second)
		gen := put(t, emu, "obj", []byte("x"))
		put(t, emu, "keep", []byte("y"))
		if err := b.Delete(ctx, "obj", gen); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if _, err := b.Stat(ctx, "obj"); !errors.Is(err, ErrNotExist) {
			t.Errorf("Stat after Delete: err = %v, want ErrNotExist", err)
		}
		if err := b.Delete(ctx, "obj", 0); !errors.Is(err, ErrNotExist) {
			t.Errorf("Delete of a missing object: err = %v, want ErrNotExist", err)
		}
		if _, err := b.Stat(ctx, "keep"); err != nil {
			t.Errorf("Delete removed another object: Stat(keep): %v", err)
		}
	})
	t.Run("DeleteGenerationMismatch", func(t *testing.T) {
		b, emu := newBucket(t)
		ctx := testutil.Ctx(t, 30*time.Second)
		gen := put(t, emu, "obj", []byte("x"))
		if err := b.Delete(ctx, "obj", gen+1); !errors.Is(err, ErrPrecondition) {
			t.Errorf("Delete with a generation that is not the live one: err = %v, want ErrPrecondition", err)
		}
		if _, err := b.Stat(ctx, "obj"); err != nil {
			t.Errorf("a refused Delete removed the object: Stat: %v", err)
		}
	})
	t.Run("Copy", func(t *testing.T) {
		b, _ := newBucket(t)
		ctx := testutil.Ctx(t, 30*time.Second)
		src, err := b.Put(ctx, "dir/src", bytes.NewReader([]byte("copied bytes")), PutOptions{Metadata: map[string]string{"mode": "600"}})
		if err != nil {
			t.Fatal(err)
		}
		a, err := b.Copy(ctx, "dir/src", src.Generation, "other/dst", PutOptions{IfGenerationMatch: 0})
		if err != nil {
			t.Fatalf("Copy: %v", err)
		}
		if a.Name != "other/dst" || a.Size != int64(len("copied bytes")) || a.Generation == 0 {
			t.Errorf("Copy returned %+v", a)
		}
		if data, _ := readAll(ctx, b, "other/dst"); string(data) != "copied bytes" {
			t.Errorf("the copy holds %q", data)
		}
		if st, _ := b.Stat(ctx, "other/dst"); st.Metadata["mode"] != "600" {
			t.Errorf("the copy's metadata %v, want the source's", st.Metadata)
		}
		if _, err := b.Copy(ctx, "dir/src", 0, "other/dst", PutOptions{IfGenerationMatch: 0}); !errors.Is(err, ErrPrecondition) {
			t.Errorf("Copy onto an existing object with does-not-exist: %v, want ErrPrecondition", err)
		}
		if _, err := b.Copy(ctx, "dir/src", 0, "other/dst", PutOptions{IfGenerationMatch: a.Generation + 1}); !errors.Is(err, ErrPrecondition) {
			t.Errorf("Copy with another generation: %v, want ErrPrecondition", err)
		}
		b2, err := b.Copy(ctx, "dir/src", 0, "other/dst", PutOptions{IfGenerationMatch: a.Generation, Metadata: map[string]string{"x": "y"}})
		if err != nil {
			t.Fatalf("Copy over the live generation: %v", err)
		}
		if st, _ := b.Stat(ctx, "other/dst"); st.Generation != b2.Generation || st.Metadata["x"] != "y" || st.Metadata["mode"] != "" {
			t.Errorf("after a copy with metadata: %+v", st)
		}
		if _, err := b.Copy(ctx, "missing", 0, "x", PutOptions{Unconditional: true}); !errors.Is(err, ErrNotExist) {
			t.Errorf("Copy of a missing source: %v, want ErrNotExist", err)
		}
		if _, err := b.Copy(ctx, "dir/src", src.Generation+1, "y", PutOptions{Unconditional: true}); !errors.Is(err, ErrNotExist) {
			t.Errorf("Copy of a generation that is not there: %v, want ErrNotExist", err)
		}
	})
	t.Run("SetMetadata", func(t *testing.T) {
		b, _ := newBucket(t)
		ctx := testutil.Ctx(t, 30*time.Second)
		a, err := b.Put(ctx, "obj", bytes.NewReader([]byte("content")), PutOptions{Metadata: map[string]string{"keep": "1", "mode": "644"}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.SetMetadata(ctx, "obj", a.Generation, map[string]string{"mode": "600", "new": "x"})
		if err != nil {
			t.Fatalf("SetMetadata: %v", err)
		}
		if got.Generation != a.Generation {
			t.Errorf("SetMetadata changed the generation %d -> %d", a.Generation, got.Generation)
		}
		st, err := b.Stat(ctx, "obj")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"keep": "1", "mode": "600", "new": "x"}
		if !maps.Equal(st.Metadata, want) {
			t.Errorf("metadata after SetMetadata = %v, want %v", st.Metadata, want)
		}
		if data, _ := readAll(ctx, b, "obj"); string(data) != "content" {
			t.Errorf("SetMetadata changed the content: %q", data)
		}
		if _, err := b.SetMetadata(ctx, "obj", a.Generation+1, map[string]string{"mode": "777"}); !errors.Is(err, ErrPrecondition) {
			t.Errorf("SetMetadata on another generation: %v, want ErrPrecondition", err)
		}
		if _, err := b.SetMetadata(ctx, "missing", 1, map[string]string{"mode": "777"}); !errors.Is(err, ErrNotExist) {
			t.Errorf("SetMetadata of a missing object: %v, want ErrNotExist", err)
		}
	})
	t.Run("Compose", func(t *testing.T) {
		b, emu := newBucket(t)
		ctx := testutil.Ctx(t, 30*time.Second)
		var want []byte
		var srcs []string
		for i := range MaxComposeSources {
			p := testutil.Pattern(1000+i, uint32(i))
			name := fmt.Sprintf("part-%02d", i)
			put(t, emu, name, p)
			want = append(want, p...)
			srcs = append(srcs, name)
		}
		a, err := b.Compose(ctx, "whole", srcs, PutOptions{IfGenerationMatch: 0, ContentType: "application/x-test", Metadata: map[string]string{"k": "v"}})
		if err != nil {
			t.Fatalf("Compose of %d sources into a new name: %v", len(srcs), err)
		}
		if a.Size != int64(len(want)) || a.Generation == 0 {
			t.Errorf("Compose returned %+v, want size %d and a generation", a, len(want))
		}
		if got, err := readAll(ctx, b, "whole"); err != nil || !bytes.Equal(got, want) {
			t.Errorf("composed object: %d bytes (err %v), want the %d bytes of the sources in order", len(got), err, len(want))
		}
		if st, err := b.Stat(ctx, "whole"); err != nil || st.Metadata["k"] != "v" || st.ContentType != "application/x-test" {
			t.Errorf("Stat of the composed object = %+v, %v; want its content type and metadata", st, err)
		}
		// Preconditions on the destination.
		if _, err := b.Compose(ctx, "whole", srcs[:1], PutOptions{IfGenerationMatch: 0}); !errors.Is(err, ErrPrecondition) {
			t.Errorf("Compose onto an existing object with IfGenerationMatch 0: err = %v, want ErrPrecondition", err)
		}
		if _, err := b.Compose(ctx, "whole", srcs[:1], PutOptions{IfGenerationMatch: a.Generation + 1}); !errors.Is(err, ErrPrecondition) {
			t.Errorf("Compose with a wrong generation: err = %v, want ErrPrecondition", err)
		}
		if got, _ := readAll(ctx, b, "whole"); len(got) != len(want) {
			t.Errorf("a refused Compose changed the object: %d bytes, want %d", len(got), len(want))
		}
		a2, err := b.Compose(ctx, "whole", srcs[:2], PutOptions{IfGenerationMatch: a.Generation})
		if err != nil || a2.Generation == a.Generation || a2.Size != 2001 {
			t.Errorf("Compose with the live generation = %+v, %v; want a new generation of 2001 bytes", a2, err)
		}
		// Bad calls.
		if _, err := b.Compose(ctx, "x", append(srcs, "one-too-many"), PutOptions{Unconditional: true}); err == nil {
			t.Errorf("Compose of %d sources succeeded, want an error", len(srcs)+1)
		}
		// GCS answers 404 (ErrNotExist); fake-gcs-server answers 500.
		if _, err := b.Compose(ctx, "x", []string{"missing"}, PutOptions{Unconditional: true}); err == nil {
			t.Errorf("Compose of a missing source succeeded")
		}
		if _, err := b.Stat(ctx, "x"); !errors.Is(err, ErrNotExist) {
			t.Errorf("a failed Compose left an object: Stat: %v", err)
		}
	})
	t.Run("RefusedUploads", func(t *testing.T) {
		// A name the bucket does not take (GCS: over 1024 bytes) is a
		// refusal of the request itself; an upload answered 404 can only
		// be about the bucket.
		b, emu := newBucket(t)
		ctx := testutil.Ctx(t, 30*time.Second)
		long := strings.Repeat("n", 1025)
		if _, err := b.Put(ctx, long, strings.NewReader("x"), PutOptions{IfGenerationMatch: 0}); !errors.Is(err, ErrInvalid) {
			t.Errorf("Put of a 1025-byte name: err = %v, want ErrInvalid", err)
		}
		emu.Fault(bucketName, http.StatusNotFound)
		defer emu.Fault(bucketName, 0)
		_, err := b.Put(ctx, "obj", strings.NewReader("x"), PutOptions{IfGenerationMatch: 0})
		if !errors.Is(err, ErrBucketNotExist) {
			t.Errorf("Put answered 404: err = %v, want ErrBucketNotExist", err)
		}
	})
	t.Run("CheckAccess", func(t *testing.T) {
		b, _ := newBucket(t)
		if err := b.CheckAccess(testutil.Ctx(t, 30*time.Second)); err != nil {
			t.Errorf("CheckAccess on an existing bucket: %v", err)
		}
	})
	t.Run("CheckAccessMissingBucket", func(t *testing.T) {
		b, emu := newBucket(t)
		if err := emu.Fake().Backend().DeleteBucket(bucketName); err != nil {
			t.Fatalf("deleting the emulator's bucket: %v", err)
		}
		err := b.CheckAccess(testutil.Ctx(t, 30*time.Second))
		if !errors.Is(err, ErrBucketNotExist) {
			t.Errorf("CheckAccess on a missing bucket: err = %v, want ErrBucketNotExist", err)
		}
		if errors.Is(err, ErrNotExist) {
			t.Errorf("CheckAccess on a missing bucket: err = %v also matches ErrNotExist (an object error)", err)
		}
		var oe *OpError
		if !errors.As(err, &oe) || oe.Op != "check" || oe.Bucket != bucketName {
			t.Errorf("CheckAccess on a missing bucket: err = %#v, want an *OpError{Op: check, Bucket: test-bucket}", err)
		}
	})
	for _, f := range []struct {
		status int
		want   error
	}{
		{http.StatusForbidden, ErrPermission},
		{http.StatusUnauthorized, ErrUnauthenticated},
	} {
		t.Run(fmt.Sprintf("Fault%d", f.status), func(t *testing.T) {
			b, emu := newBucket(t)
			put(t, emu, "obj", []byte("data"))
			emu.Fault(bucketName, f.status)
			ctx := testutil.Ctx(t, 30*time.Second)
			calls := []struct {
				op   string
				call func() error
			}{
				{"Stat", func() error { _, err := b.Stat(ctx, "obj"); return err }},
				{"List", func() error { _, err := b.List(ctx, ListQuery{Delimiter: "/"}); return err }},
				{"ReadRange", func() error {
					_, err := b.ReadRange(ctx, "obj", 0, 0, 4, &bytes.Buffer{})
					return err
				}},
				{"Put", func() error {
					_, err := b.Put(ctx, "obj2", strings.NewReader("x"), PutOptions{IfGenerationMatch: 0})
					return err
				}},
				{"Compose", func() error {
					_, err := b.Compose(ctx, "obj3", []string{"obj"}, PutOptions{Unconditional: true})
					return err
				}},
				{"Delete", func() error { return b.Delete(ctx, "obj", 0) }},
				{"CheckAccess", func() error { return b.CheckAccess(ctx) }},
			}
			for _, c := range calls {
				err := c.call()
				if !errors.Is(err, f.want) {
					t.Errorf("%s under fault %d: err = %v, want %v", c.op, f.status, err, f.want)
				}
				var oe *OpError
				if !errors.As(err, &oe) {
					t.Errorf("%s under fault %d: err = %v (%T), want an *OpError", c.op, f.status, err, err)
				}
			}
			emu.Fault(bucketName, 0)
			if got, err := readAll(ctx, b, "obj"); err != nil || string(got) != "data" {
				t.Errorf("after the fault was cleared: read %q, %v; want %q", got, err, "data")
			}
		})
	}
	t.Run("CancelledContext", func(t *testing.T) {
		b, emu := newBucket(t)
		put(t, emu, "obj", []byte("data"))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := b.Stat(ctx, "obj"); !errors.Is(err, context.Canceled) {
			t.Errorf("Stat with a cancelled context: err = %v, want context.Canceled", err)
		}
		if _, err := b.ReadRange(ctx, "obj", 0, 0, 4, &bytes.Buffer{}); !errors.Is(err, context.Canceled) {
			t.Errorf("ReadRange with a cancelled context: err = %v, want context.Canceled", err)
		}
	})
	t.Run("CancelWhileAtServer", func(t *testing.T) {
		b, emu := newBucket(t)
		put(t, emu, "obj", testutil.Pattern(100, 6))
		parked := make(chan struct{}, 1)
		emu.SetHook(func(r *http.Request) (int, bool) {
			if isMediaRead(r) {
				parked <- struct{}{}
				<-r.Context().Done()
				return http.StatusServiceUnavailable, true
			}
			return 0, false
		})
		ctx, cancel := context.WithCancel(testutil.Ctx(t, 30*time.Second))
		done := make(chan error, 1)
		go func() {
			_, err := b.ReadRange(ctx, "obj", 0, 0, 100, &bytes.Buffer{})
			done <- err
		}()
		select {
		case <-parked:
		case <-time.After(20 * time.Second):
			t.Fatal("the read never reached the server")
		}
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("ReadRange cancelled at the server: err = %v, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("ReadRange did not return within 10s of its context being cancelled")
		}
	})
	t.Run("ConcurrentReads", func(t *testing.T) {
		b, emu := newBucket(t)
		data := testutil.Pattern(64<<10, 7)
		gen := put(t, emu, "obj", data)
		ctx := testutil.Ctx(t, 60*time.Second)
		const n = 8
		part := int64(len(data) / n)
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				var buf bytes.Buffer
				off := int64(i) * part
				got, err := b.ReadRange(ctx, "obj", gen, off, part, &buf)
				switch {
				case err != nil:
					errs[i] = err
				case got != part || !bytes.Equal(buf.Bytes(), data[off:off+part]):
					errs[i] = fmt.Errorf("part %d: wrong bytes (%d read)", i, got)
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// TestReadRangeAtEnd pins down the ReadRange contract at the end of an
// object: "a short count with a nil error means the object ended first".
// A read starting exactly at the end has nothing to copy; it should report
// 0 bytes and no error, like io.ReaderAt callers expect, not a 416 error.
func TestReadRangeAtEnd(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	gen := put(t, emu, "obj", testutil.Pattern(100, 8))
	var buf bytes.Buffer
	n, err := g.ReadRange(testutil.Ctx(t, 30*time.Second), "obj", gen, 100, 10, &buf)
	if err != nil || n != 0 {
		t.Errorf("BUG: ReadRange(off = size = 100, len 10) = %d, %v; want 0, nil (a short count at the end of the object)", n, err)
	}
}

func TestValidBucketName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"b12", true},
		{"my-bucket", true},
		{"my_bucket.example.com", true},
		{"0numeric9", true},
		{"ab", false},                                // too short
		{"", false},                                  // empty
		{"My-Bucket", false},                         // upper case
		{"-bucket", false},                           // starts with a dash
		{"bucket-", false},                           // ends with a dash
		{"_bucket", false},                           // starts with an underscore
		{"bucket.", false},                           // ends with a dot
		{"buc ket", false},                           // space
		{"bucket/obj", false},                        // slash
		{"gs://bucket", false},                       // a URL, not a name
		{"bücket", false},                            // non-ASCII
		{strings.Repeat("abcd.", 44) + "ab", true},   // 222 characters
		{strings.Repeat("abcd.", 44) + "abc", false}, // 223 characters
	}
	for _, tt := range tests {
		err := ValidBucketName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("ValidBucketName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.name)) {
			t.Errorf("ValidBucketName(%q): message %q does not quote the name", tt.name, err)
		}
	}
}

// TestValidBucketNameComponentLength: GCS bucket names have 3 to 63
// characters; only names with dots may be longer (up to 222), and then each
// dot-separated component has at most 63 characters.
func TestValidBucketNameComponentLength(t *testing.T) {
	for _, name := range []string{
		strings.Repeat("a", 64),                      // no dots, 64 characters
		strings.Repeat("a", 200),                     // no dots, 200 characters
		"ok." + strings.Repeat("b", 64) + ".example", // one component of 64
	} {
		if err := ValidBucketName(name); err == nil {
			t.Errorf("BUG: ValidBucketName accepts %q (%d characters); GCS allows at most 63 characters per dot-separated component", name, len(name))
		}
	}
	if err := ValidBucketName(strings.Repeat("a", 63)); err != nil {
		t.Errorf("ValidBucketName of 63 characters: %v", err)
	}
}

func TestNewGCSRejectsBadBucketName(t *testing.T) {
	_, err := NewGCS(testutil.Ctx(t, 10*time.Second), "Bad_Name", GCSOptions{Endpoint: "http://127.0.0.1:1", Anonymous: true})
	if err == nil {
		t.Fatal("NewGCS accepted an invalid bucket name")
	}
}

func TestNormalizeEndpoint(t *testing.T) {
	tests := []struct {
		in, want string // want "" means an error
	}{
		{"http://127.0.0.1:4443", "http://127.0.0.1:4443/storage/v1/"},
		{"http://127.0.0.1:4443/", "http://127.0.0.1:4443/storage/v1/"},
		{"https://storage.example.com", "https://storage.example.com/storage/v1/"},
		{"http://localhost:9000/storage/v1", "http://localhost:9000/storage/v1/"},
		{"http://localhost:9000/storage/v1/", "http://localhost:9000/storage/v1/"},
		{"https://proxy.example.com/gcs/storage/v1", "https://proxy.example.com/gcs/storage/v1/"},
		{"127.0.0.1:4443", ""},      // no scheme
		{"localhost:4443", ""},      // parsed as scheme "localhost"
		{"ftp://host/", ""},         // wrong scheme
		{"http://", ""},             // no host
		{"http:///storage/v1/", ""}, // no host
		{"", ""},
		{"http://bad host/", ""},
	}
	for _, tt := range tests {
		got, err := normalizeEndpoint(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("normalizeEndpoint(%q) = %q, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("normalizeEndpoint(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestNewGCSRejectsBadEndpoint(t *testing.T) {
	_, err := NewGCS(testutil.Ctx(t, 10*time.Second), "bucket", GCSOptions{Endpoint: "localhost:4443", Anonymous: true})
	if err == nil || !strings.Contains(err.Error(), "invalid endpoint") {
		t.Errorf("NewGCS with endpoint without scheme: err = %v, want an invalid endpoint error", err)
	}
}
