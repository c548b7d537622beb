package emulator

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"iter"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
)

// seeds yields n objects "prefix%07d" whose content is their index.
func seeds(prefix string, n int) iter.Seq[Seed] {
	return func(yield func(Seed) bool) {
		for i := range n {
			if !yield(Seed{Name: fmt.Sprintf("%s%07d", prefix, i), Data: []byte(fmt.Sprint(i))}) {
				return
			}
		}
	}
}

// listAll lists q through c's iterator, pages of pageSize (0: the
// client's default, which names no size), and returns names and prefixes
// in the order given.
func listAll(ctx context.Context, t *testing.T, c *storage.Client, q *storage.Query, pageSize int) (names, prefixes []string) {
	t.Helper()
	it := c.Bucket(testBucket).Objects(ctx, q)
	it.PageInfo().MaxSize = pageSize
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return names, prefixes
		}
		if err != nil {
			t.Fatalf("list %+v: %v", q, err)
		}
		if a.Prefix != "" {
			prefixes = append(prefixes, a.Prefix)
		} else {
			names = append(names, a.Name)
		}
	}
}

// TestSeededHundredThousand seeds a directory of 100,000 objects and
// lists it, with a delimiter, through the official client, stats and
// reads some of them, and writes, deletes and composes seeded objects
// through the JSON API. The fake alone takes minutes for this (its
// inserts are quadratic).
func TestSeededHundredThousand(t *testing.T) {
	ctx := testutil.Ctx(t, 2*time.Minute)
	s := start(t, nil)
	c := newClient(t, s, false)
	const n = 100_000
	t0 := time.Now()
	if got, err := s.PutMany(testBucket, seeds("dir/f", n)); err != nil || got != n {
		t.Fatalf("PutMany = %d, %v; want %d", got, err, n)
	}
	// Subdirectories before, among and after the files, and an object the
	// fake holds, all in the listing.
	if _, err := s.PutMany(testBucket, slices.Values([]Seed{{Name: "dir/a/x"}, {Name: "dir/f0050000x/y"}, {Name: "dir/z/x"}, {Name: "other"}})); err != nil {
		t.Fatalf("PutMany: %v", err)
	}
	if _, err := s.Put(testBucket, "dir/f0050000.fake", []byte("fake")); err != nil {
		t.Fatalf("Put: %v", err)
	}

	t.Logf("seeded %d objects in %v", n, time.Since(t0))
	t0 = time.Now()
	// The fields transfer.GCS.List asks for, as it asks: a partial
	// response, as GCS gives one.
	q := &storage.Query{Prefix: "dir/", Delimiter: "/"}
	if err := q.SetAttrSelection([]string{"Name"}); err != nil {
		t.Fatal(err)
	}
	names, prefixes := listAll(ctx, t, c, q, 0)
	t.Logf("listed them in %v", time.Since(t0))
	if len(names) != n+1 || !slices.IsSorted(names) || slices.Compact(slices.Clone(names)) == nil {
		t.Fatalf("listed %d names (sorted %v), want %d", len(names), slices.IsSorted(names), n+1)
	}
	if len(slices.Compact(slices.Clone(names))) != n+1 {
		t.Fatalf("listing repeats names")
	}
	if i, ok := slices.BinarySearch(names, "dir/f0050000.fake"); !ok || names[i+1] != "dir/f0050001" {
		t.Fatalf("the fake's object is not in its place in the listing")
	}
	if want := []string{"dir/a/", "dir/f0050000x/", "dir/z/"}; !slices.Equal(prefixes, want) {
		t.Fatalf("prefixes = %q, want %q", prefixes, want)
	}
	// Pages of another size, as transfer.GCS.List asks them, all fields.
	names, prefixes = listAll(ctx, t, c, &storage.Query{Prefix: "dir/f00499", Delimiter: "/"}, 77)
	if len(names) != 100 || names[99] != "dir/f0049999" || len(prefixes) != 0 {
		t.Fatalf("pages of 77: %d names, %d prefixes", len(names), len(prefixes))
	}

	for _, i := range []int{0, 1, 31_337, n - 1} {
		name := fmt.Sprintf("dir/f%07d", i)
		data := []byte(fmt.Sprint(i))
		a, err := c.Bucket(testBucket).Object(name).Attrs(ctx)
		if err != nil {
			t.Fatalf("Attrs %s: %v", name, err)
		}
		gen, _ := s.Generation(testBucket, name)
		sum := md5.Sum(data)
		if a.Size != int64(len(data)) || a.Generation != gen || a.CRC32C != crc32.Checksum(data, castagnoli) || !bytes.Equal(a.MD5, sum[:]) {
			t.Fatalf("Attrs %s = size %d gen %d crc %x md5 %x; want %d %d", name, a.Size, a.Generation, a.CRC32C, a.MD5, len(data), gen)
		}
		got, err := readAll(ctx, c, testBucket, name, gen, 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %s = %q, %v; want %q", name, got, err, data)
		}
		if got, err := readAll(ctx, c, testBucket, name, -1, 1, 1); len(data) > 1 && (err != nil || !bytes.Equal(got, data[1:2])) {
			t.Fatalf("range read %s = %q, %v", name, got, err)
		}
	}
	if s.SeededObjects(testBucket) != n+4 {
		t.Fatalf("reads moved objects out of the seeded store: %d left", s.SeededObjects(testBucket))
	}
	seededWrites(ctx, t, s, c)
}

// seededWrites overwrites (with preconditions), deletes and composes
// seeded objects of TestSeededHundredThousand through the JSON API.
func seededWrites(ctx context.Context, t *testing.T, s *Server, c *storage.Client) {
	t.Helper()
	o := c.Bucket(testBucket).Object("dir/f0000007")
	gen, _ := s.Generation(testBucket, "dir/f0000007")
	w := o.If(storage.Conditions{GenerationMatch: gen + 1}).NewWriter(ctx)
	_, _ = w.Write([]byte("lost"))
	var gerr *googleapi.Error
	if err := w.Close(); !errors.As(err, &gerr) || gerr.Code != http.StatusPreconditionFailed {
		t.Fatalf("overwrite with a wrong generation: %v, want 412", err)
	}
	w = o.If(storage.Conditions{GenerationMatch: gen}).NewWriter(ctx)
	_, _ = w.Write([]byte("new"))
	if err := w.Close(); err != nil {
		t.Fatalf("overwrite with the seeded generation: %v", err)
	}
	if got, err := readAll(ctx, c, testBucket, "dir/f0000007", -1, 0, -1); err != nil || string(got) != "new" {
		t.Fatalf("read after overwrite = %q, %v", got, err)
	}
	if err := c.Bucket(testBucket).Object("dir/f0000008").Delete(ctx); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := c.Bucket(testBucket).Object("dir/f0000008").Attrs(ctx); !errors.Is(err, storage.ErrObjectNotExist) {
		t.Fatalf("Attrs after delete: %v, want not found", err)
	}
	dst := c.Bucket(testBucket).Object("composed")
	if _, err := dst.ComposerFrom(c.Bucket(testBucket).Object("dir/f0000012"), c.Bucket(testBucket).Object("dir/f0000034")).Run(ctx); err != nil {
		t.Fatalf("compose: %v", err)
	}
	if got, err := readAll(ctx, c, testBucket, "composed", -1, 0, -1); err != nil || string(got) != "1234" {
		t.Fatalf("composed = %q, %v", got, err)
	}
	names, _ := listAll(ctx, t, c, &storage.Query{Prefix: "dir/f000000"}, 3)
	want := []string{"dir/f0000000", "dir/f0000001", "dir/f0000002", "dir/f0000003", "dir/f0000004", "dir/f0000005", "dir/f0000006", "dir/f0000007", "dir/f0000009"}
	if !slices.Equal(names, want) {
		t.Fatalf("listing after the writes = %q, want %q", names, want)
	}
}

// TestSeededLooksUploaded compares what a client gets for a seeded object
// and for the same bytes put in the fake of a bucket never seeded:
// objects.get's JSON fields, a listing's, and a media read's headers,
// status and body, whole and ranged (download and XML forms too).
func TestSeededLooksUploaded(t *testing.T) {
	ctx := testutil.Ctx(t, 30*time.Second)
	s := start(t, nil)
	data := []byte("0123456789")
	// "plain" is never seeded: the fake answers for it as it always did.
	s.CreateBucket("plain")
	if _, err := s.Put("plain", "fake", data); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutMany(testBucket, slices.Values([]Seed{{Name: "seeded", Data: data}})); err != nil {
		t.Fatal(err)
	}
	get := func(path, rng string) (*http.Response, []byte) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+path, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	same := func(what string, fake, seeded string) {
		t.Helper()
		norm := strings.NewReplacer("seeded", "NAME", "fake", "NAME", testBucket, "BUCKET", "plain", "BUCKET")
		if norm.Replace(fake) != norm.Replace(seeded) {
			t.Errorf("%s differs:\nfake:   %s\nseeded: %s", what, fake, seeded)
		}
	}
	forms := [][2]string{
		{"/storage/v1/b/plain/o/fake", "/storage/v1/b/" + testBucket + "/o/seeded"},
		{"/storage/v1/b/plain/o/fake?alt=media", "/storage/v1/b/" + testBucket + "/o/seeded?alt=media"},
		{"/download/storage/v1/b/plain/o/fake", "/download/storage/v1/b/" + testBucket + "/o/seeded"},
		{"/plain/fake", "/" + testBucket + "/seeded"},
	}
	for _, f := range forms {
		for _, rng := range []string{"", "bytes=2-4", "bytes=-3", "bytes=8-", "bytes=20-", "bytes=5-2", "items=1-2"} {
			rf, bf := get(f[0], rng)
			rs, bs := get(f[1], rng)
			what := fmt.Sprintf("GET %s Range %q", f[1], rng)
			same(what+" status", fmt.Sprint(rf.StatusCode), fmt.Sprint(rs.StatusCode))
			same(what+" headers", headerShape(rf.Header), headerShape(rs.Header))
			same(what+" body", jsonShape(bf), jsonShape(bs))
		}
	}
	_, bf := get("/storage/v1/b/plain/o?prefix=fake", "")
	_, bs := get("/storage/v1/b/"+testBucket+"/o?prefix=seeded", "")
	same("listing", jsonShape(bf), jsonShape(bs))
}

// headerShape is h without the headers that differ between two objects
// (generation, times) and between two answers (date).
func headerShape(h http.Header) string {
	h = h.Clone()
	keys := []string{"Date", "X-Goog-Generation", "Last-Modified"}
	if strings.HasPrefix(h.Get("Content-Type"), "application/json") {
		// Times are written to the microsecond without trailing zeros;
		// the bodies are compared apart.
		keys = append(keys, "Content-Length")
	}
	for _, k := range keys {
		if h.Get(k) != "" {
			h.Set(k, "*")
		}
	}
	var b strings.Builder
	_ = h.Write(&b)
	return b.String()
}

// jsonShape is a JSON body without the fields that differ between two
// objects of the same bytes; a body that is not JSON is itself.
func jsonShape(body []byte) string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return string(body)
	}
	var strip func(v any)
	strip = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range []string{"generation", "timeCreated", "updated", "timeStorageClassUpdated"} {
				if _, ok := x[k]; ok {
					x[k] = "*"
				}
			}
			for _, e := range x {
				strip(e)
			}
		case []any:
			for _, e := range x {
				strip(e)
			}
		}
	}
	strip(v)
	out, _ := json.Marshal(v)
	return string(out)
}
