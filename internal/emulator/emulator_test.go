package emulator

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
)

const testBucket = "test-bucket"

// start runs an emulator with testBucket for the duration of the test.
func start(t *testing.T, wan *WANProfile) *Server {
	t.Helper()
	s, err := Start(Options{Buckets: []string{testBucket}, WAN: wan})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// newClient returns an official client for s, with JSON reads unless xml.
func newClient(t *testing.T, s *Server, xml bool) *storage.Client {
	t.Helper()
	opts := s.ClientOptions()
	if xml {
		opts = []option.ClientOption{
			option.WithEndpoint(s.URL() + "/storage/v1/"),
			option.WithoutAuthentication(),
		}
	}
	c, err := storage.NewClient(context.Background(), opts...)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readAll reads length bytes at off (length < 0: to the end) of gen (< 0:
// current) through c.
func readAll(ctx context.Context, c *storage.Client, bucket, name string, gen, off, length int64) ([]byte, error) {
	obj := c.Bucket(bucket).Object(name)
	if gen >= 0 {
		obj = obj.Generation(gen)
	}
	r, err := obj.NewRangeReader(ctx, off, length)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func TestPutReadRangeList(t *testing.T) {
	ctx := testutil.Ctx(t, 30*time.Second)
	s := start(t, nil)
	c := newClient(t, s, false)

	data := testutil.Pattern(1<<20, 0)
	gen, err := s.Put(testBucket, "dir/file.bin", data)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if g, err := s.Generation(testBucket, "dir/file.bin"); err != nil || g != gen {
		t.Fatalf("Generation = %d, %v; want %d", g, err, gen)
	}
	if s.Requests() != 0 || s.TotalMediaReads() != 0 {
		t.Fatalf("Put went through HTTP: requests=%d media=%d", s.Requests(), s.TotalMediaReads())
	}

	got, err := readAll(ctx, c, testBucket, "dir/file.bin", -1, 0, -1)
	if err != nil {
		t.Fatalf("full read: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("full read: %d bytes, not equal to the %d put", len(got), len(data))
	}
	if n := s.MediaReads(testBucket, "dir/file.bin"); n != 1 {
		t.Fatalf("MediaReads after full read = %d, want 1", n)
	}

	s.ResetCounters()
	ranges := [][2]int64{{0, 10}, {1000, 4096}, {int64(len(data)) - 7, 7}, {500000, 1}}
	for i, rg := range ranges {
		got, err := readAll(ctx, c, testBucket, "dir/file.bin", gen, rg[0], rg[1])
		if err != nil {
			t.Fatalf("range read %v: %v", rg, err)
		}
		if want := data[rg[0] : rg[0]+rg[1]]; !bytes.Equal(got, want) {
			t.Fatalf("range read %v: got %d bytes, not equal", rg, len(got))
		}
		if n := s.MediaReads(testBucket, "dir/file.bin"); n != int64(i+1) {
			t.Fatalf("MediaReads after %d range reads = %d", i+1, n)
		}
	}
	if s.TotalMediaReads() != int64(len(ranges)) || s.Requests() != int64(len(ranges)) {
		t.Fatalf("TotalMediaReads = %d, Requests = %d; want %d each", s.TotalMediaReads(), s.Requests(), len(ranges))
	}

	// A metadata call is a request but not a media read.
	s.ResetCounters()
	attrs, err := c.Bucket(testBucket).Object("dir/file.bin").Attrs(ctx)
	if err != nil {
		t.Fatalf("Attrs: %v", err)
	}
	if attrs.Generation != gen || attrs.Size != int64(len(data)) {
		t.Fatalf("Attrs: generation %d size %d; want %d %d", attrs.Generation, attrs.Size, gen, len(data))
	}
	if s.Requests() != 1 || s.TotalMediaReads() != 0 {
		t.Fatalf("after Attrs: requests=%d media=%d; want 1, 0", s.Requests(), s.TotalMediaReads())
	}

	// Listing with prefix and delimiter: objects and implicit directories.
	for _, name := range []string{"a/b/1", "a/b/2", "a/c", "a/d/x/y", "b", "a/"} {
		if _, err := s.Put(testBucket, name, []byte(name)); err != nil {
			t.Fatalf("Put %s: %v", name, err)
		}
	}
	var objects, prefixes []string
	it := c.Bucket(testBucket).Objects(ctx, &storage.Query{Prefix: "a/", Delimiter: "/"})
	for {
		a, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if a.Prefix != "" {
			prefixes = append(prefixes, a.Prefix)
		} else {
			objects = append(objects, a.Name)
		}
	}
	slices.Sort(objects)
	slices.Sort(prefixes)
	if want := []string{"a/", "a/c"}; !slices.Equal(objects, want) {
		t.Errorf("listed objects %q, want %q", objects, want)
	}
	if want := []string{"a/b/", "a/d/"}; !slices.Equal(prefixes, want) {
		t.Errorf("listed prefixes %q, want %q", prefixes, want)
	}
}

func TestOtherReadForms(t *testing.T) {
	ctx := testutil.Ctx(t, 30*time.Second)
	s := start(t, nil)
	data := testutil.Pattern(5000, 0)
	// A name with "//" and a space: the counters must decode it.
	const name = "odd//name with space"
	if _, err := s.Put(testBucket, name, data); err != nil {
		t.Fatal(err)
	}

	// The XML form, as the client sends it without WithJSONReads.
	xc := newClient(t, s, true)
	got, err := readAll(ctx, xc, testBucket, name, -1, 100, 200)
	if err != nil {
		t.Fatalf("XML range read: %v", err)
	}
	if !bytes.Equal(got, data[100:300]) {
		t.Fatalf("XML range read: wrong bytes")
	}
	if n := s.MediaReads(testBucket, name); n != 1 {
		t.Fatalf("MediaReads after XML read = %d, want 1", n)
	}

	// The /download/ form, as in an object's mediaLink.
	attrs, err := newClient(t, s, false).Bucket(testBucket).Object(name).Attrs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, attrs.MediaLink, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET mediaLink %s: %v", attrs.MediaLink, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("GET mediaLink: status %d, %d bytes, err %v", resp.StatusCode, len(body), err)
	}
	if n := s.MediaReads(testBucket, name); n != 2 {
		t.Fatalf("MediaReads after /download/ read = %d, want 2", n)
	}
	if s.TotalMediaReads() != 2 {
		t.Fatalf("TotalMediaReads = %d, want 2", s.TotalMediaReads())
	}
}

func TestGenerations(t *testing.T) {
	ctx := testutil.Ctx(t, 30*time.Second)
	s := start(t, nil)
	c := newClient(t, s, false)

	v1, v2 := []byte("version one"), []byte("version two!")
	g1, err := s.Put(testBucket, "f", v1)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := s.Put(testBucket, "f", v2)
	if err != nil {
		t.Fatal(err)
	}
	if g2 <= g1 {
		t.Fatalf("generations not increasing: %d then %d", g1, g2)
	}

	got, err := readAll(ctx, c, testBucket, "f", g2, 8, 4)
	if err != nil || string(got) != "two!" {
		t.Fatalf("range read of current generation: %q, %v", got, err)
	}
	// Without versioning the fake keeps no old generation: 404, which the
	// client reports as ErrObjectNotExist.
	_, err = readAll(ctx, c, testBucket, "f", g1, 0, -1)
	if !errors.Is(err, storage.ErrObjectNotExist) {
		t.Fatalf("read of replaced generation: %v, want ErrObjectNotExist", err)
	}
	_, err = readAll(ctx, c, testBucket, "f", g2+12345, 0, -1)
	if !errors.Is(err, storage.ErrObjectNotExist) {
		t.Fatalf("read of unknown generation: %v, want ErrObjectNotExist", err)
	}
	// Only the current generation is listed.
	a, err := c.Bucket(testBucket).Object("f").Attrs(ctx)
	if err != nil || a.Generation != g2 {
		t.Fatalf("Attrs: gen %v, %v; want %d", a, err, g2)
	}

	// With versioning the old generation stays readable.
	s.Fake().CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "versioned", VersioningEnabled: true})
	h1, err := s.Put("versioned", "f", v1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put("versioned", "f", v2); err != nil {
		t.Fatal(err)
	}
	got, err = readAll(ctx, c, "versioned", "f", h1, 8, 3)
	if err != nil || string(got) != "one" {
		t.Fatalf("versioned bucket, old generation: %q, %v", got, err)
	}

	// Delete and Generation of missing things.
	if err := s.Delete(testBucket, "f"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Generation(testBucket, "f"); !errors.Is(err, ErrObjectNotFound) {
		t.Fatalf("Generation after Delete: %v", err)
	}
	if err := s.Delete(testBucket, "f"); !errors.Is(err, ErrObjectNotFound) {
		t.Fatalf("second Delete: %v", err)
	}
	if _, err := s.Put("no-such-bucket", "f", v1); !errors.Is(err, ErrBucketNotFound) {
		t.Fatalf("Put into missing bucket: %v", err)
	}

	// Rapid Puts of one object never repeat a generation.
	last := int64(0)
	for i := range 200 {
		g, err := s.Put(testBucket, "rapid", []byte{byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		if g <= last {
			t.Fatalf("Put %d: generation %d after %d", i, g, last)
		}
		last = g
	}
}

func TestUploadThroughClient(t *testing.T) {
	ctx := testutil.Ctx(t, 30*time.Second)
	s := start(t, nil)
	c := newClient(t, s, false)

	for _, tc := range []struct {
		name      string
		size      int
		chunkSize int
	}{
		{"small", 1000, 0},
		{"resumable", 1 << 20, 256 << 10}, // several chunks: session URLs must point here
	} {
		data := testutil.Pattern(tc.size, 0)
		w := c.Bucket(testBucket).Object(tc.name).NewWriter(ctx)
		w.ChunkSize = tc.chunkSize
		if _, err := w.Write(data); err != nil {
			t.Fatalf("%s: write: %v", tc.name, err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("%s: close: %v", tc.name, err)
		}
		g, err := s.Generation(testBucket, tc.name)
		if err != nil || g != w.Attrs().Generation {
			t.Fatalf("%s: Generation %d, %v; writer says %d", tc.name, g, err, w.Attrs().Generation)
		}
		got, err := readAll(ctx, c, testBucket, tc.name, g, 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: read back %d bytes, %v", tc.name, len(got), err)
		}
	}
}

func TestFaultAndMissingBucket(t *testing.T) {
	ctx := testutil.Ctx(t, 30*time.Second)
	s := start(t, nil)
	c := newClient(t, s, false)
	if _, err := s.Put(testBucket, "f", []byte("data")); err != nil {
		t.Fatal(err)
	}
	b := c.Bucket(testBucket)

	wantCode := func(what string, err error, code int) {
		t.Helper()
		var ge *googleapi.Error
		if !errors.As(err, &ge) || ge.Code != code {
			t.Errorf("%s: error %v (%T), want *googleapi.Error with code %d", what, err, err, code)
		}
	}
	for _, code := range []int{http.StatusForbidden, http.StatusUnauthorized} {
		s.Fault(testBucket, code)
		_, err := b.Object("f").NewReader(ctx)
		wantCode("NewReader", err, code)
		_, err = b.Object("f").Attrs(ctx)
		wantCode("object Attrs", err, code)
		_, err = b.Attrs(ctx)
		wantCode("bucket Attrs", err, code)
		_, err = b.Objects(ctx, nil).Next()
		wantCode("Objects", err, code)
		w := b.Object("g").NewWriter(ctx)
		_, _ = w.Write([]byte("x"))
		wantCode("Writer.Close", w.Close(), code)
		// XML reads too.
		_, err = newClient(t, s, true).Bucket(testBucket).Object("f").NewReader(ctx)
		wantCode("XML NewReader", err, code)
	}
	// Other buckets are unaffected; the counters saw the faulted requests.
	if s.MediaReads(testBucket, "f") != 4 {
		t.Errorf("MediaReads of faulted reads = %d, want 4", s.MediaReads(testBucket, "f"))
	}
	s.Fault(testBucket, 0)
	got, err := readAll(ctx, c, testBucket, "f", -1, 0, -1)
	if err != nil || string(got) != "data" {
		t.Fatalf("read after clearing the fault: %q, %v", got, err)
	}

	// A missing bucket: bucket calls give ErrBucketNotExist, object calls
	// ErrObjectNotExist (as against real GCS).
	m := c.Bucket("missing-bucket")
	if _, err := m.Attrs(ctx); !errors.Is(err, storage.ErrBucketNotExist) {
		t.Errorf("missing bucket Attrs: %v, want ErrBucketNotExist", err)
	}
	if _, err := m.Objects(ctx, nil).Next(); !errors.Is(err, storage.ErrBucketNotExist) {
		t.Errorf("missing bucket Objects: %v, want ErrBucketNotExist", err)
	}
	if _, err := m.Object("f").Attrs(ctx); !errors.Is(err, storage.ErrObjectNotExist) {
		t.Errorf("object Attrs in missing bucket: %v, want ErrObjectNotExist", err)
	}
	if _, err := m.Object("f").NewReader(ctx); !errors.Is(err, storage.ErrObjectNotExist) {
		t.Errorf("NewReader in missing bucket: %v, want ErrObjectNotExist", err)
	}
}

func TestHook(t *testing.T) {
	ctx := testutil.Ctx(t, 30*time.Second)
	s := start(t, nil)
	c := newClient(t, s, false)
	if _, err := s.Put(testBucket, "f", []byte("data")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	s.SetHook(func(r *http.Request) (int, bool) {
		mu.Lock()
		seen = append(seen, r.URL.Path)
		mu.Unlock()
		return http.StatusForbidden, r.URL.Query().Get("alt") == "media"
	})
	if _, err := c.Bucket(testBucket).Object("f").Attrs(ctx); err != nil {
		t.Fatalf("Attrs with a hook that passes it: %v", err)
	}
	_, err := c.Bucket(testBucket).Object("f").NewReader(ctx)
	var ge *googleapi.Error
	if !errors.As(err, &ge) || ge.Code != http.StatusForbidden {
		t.Fatalf("NewReader with a refusing hook: %v", err)
	}
	s.SetHook(nil)
	if _, err := readAll(ctx, c, testBucket, "f", -1, 0, -1); err != nil {
		t.Fatalf("read after clearing the hook: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("hook saw %d requests (%q), want 2", len(seen), seen)
	}
}

func TestWANPerConn(t *testing.T) {
	ctx := testutil.Ctx(t, 60*time.Second)
	s := start(t, &WANProfile{Latency: 50 * time.Millisecond, PerConn: 4 << 20})
	c := newClient(t, s, false)
	data := testutil.Pattern(4<<20, 0)
	if _, err := s.Put(testBucket, "big", data); err != nil {
		t.Fatal(err)
	}

	t0 := time.Now()
	if _, err := c.Bucket(testBucket).Object("big").Attrs(ctx); err != nil {
		t.Fatal(err)
	}
	d := time.Since(t0)
	t.Logf("metadata call: %v", d)
	if d < 50*time.Millisecond {
		t.Errorf("metadata call took %v, want >= 50ms", d)
	}

	t0 = time.Now()
	got, err := readAll(ctx, c, testBucket, "big", -1, 0, -1)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read: %d bytes, %v", len(got), err)
	}
	// 4 MiB at 4 MiB/s, less the first 256 KiB burst: >= ~0.94s.
	d = time.Since(t0)
	t.Logf("4 MiB at 4 MiB/s: %v", d)
	if d < 900*time.Millisecond {
		t.Errorf("4 MiB at 4 MiB/s took %v, want >= 0.9s", d)
	}
	if s.Requests() != 2 || s.MediaReads(testBucket, "big") != 1 {
		t.Errorf("requests=%d media=%d under shaping; want 2, 1", s.Requests(), s.MediaReads(testBucket, "big"))
	}

	// Uploads are paced too: 1 MiB at 4 MiB/s >= ~0.19s (0.25s less burst).
	t0 = time.Now()
	w := c.Bucket(testBucket).Object("up").NewWriter(ctx)
	if _, err := w.Write(data[:1<<20]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	d = time.Since(t0)
	t.Logf("1 MiB upload at 4 MiB/s: %v", d)
	if d < 180*time.Millisecond {
		t.Errorf("1 MiB upload at 4 MiB/s took %v, want >= 0.18s", d)
	}
}

func TestWANTotal(t *testing.T) {
	ctx := testutil.Ctx(t, 60*time.Second)
	s := start(t, &WANProfile{Total: 8 << 20})
	c := newClient(t, s, false)
	data := testutil.Pattern(2<<20, 0)
	names := []string{"p0", "p1", "p2", "p3"}
	for _, n := range names {
		if _, err := s.Put(testBucket, n, data); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	errs := make(chan error, len(names))
	for _, n := range names {
		go func() {
			got, err := readAll(ctx, c, testBucket, n, -1, 0, -1)
			if err == nil && !bytes.Equal(got, data) {
				err = errors.New(n + ": wrong bytes")
			}
			errs <- err
		}()
	}
	for range names {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// 8 MiB in total at 8 MiB/s, less one 256 KiB burst: >= ~0.97s.
	d := time.Since(t0)
	t.Logf("4 x 2 MiB under an 8 MiB/s total: %v", d)
	if d < 900*time.Millisecond {
		t.Errorf("4 x 2 MiB under an 8 MiB/s total took %v, want >= 0.9s", d)
	}
}

// TestWANCancel checks that a client going away ends the shaping wait (and
// so the handler) promptly, and that Close does not hang.
func TestWANCancel(t *testing.T) {
	ctx := testutil.Ctx(t, 30*time.Second)
	s := start(t, &WANProfile{PerConn: 64 << 10}) // 4 MiB would take a minute
	c := newClient(t, s, false)
	if _, err := s.Put(testBucket, "slow", testutil.Pattern(4<<20, 0)); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	r, err := c.Bucket(testBucket).Object("slow").NewReader(rctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(r, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	cancel()
	r.Close()

	if !s.inflight.wait(5*time.Second, false) {
		t.Fatal("handler still running 5s after the client went away")
	}
	t0 := time.Now()
	s.Close()
	s.Close() // idempotent
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
}

// TestCloseCancelsShaping checks that Close ends a request stuck in shaping.
func TestCloseCancelsShaping(t *testing.T) {
	ctx := testutil.Ctx(t, 30*time.Second)
	s := start(t, &WANProfile{Latency: time.Minute})
	c := newClient(t, s, false)
	arrived := make(chan struct{}, 1)
	f := func(*http.Request) { arrived <- struct{}{} }
	s.arrived.Store(&f)
	errc := make(chan error, 1)
	go func() {
		// No retries: the client would otherwise retry the broken
		// connection until ctx ends.
		_, err := c.Bucket(testBucket).Retryer(storage.WithPolicy(storage.RetryNever)).Attrs(ctx)
		errc <- err
	}()
	select {
	case <-arrived: // the request is now in (or about to enter) the latency wait
	case <-ctx.Done():
		t.Fatal("request never arrived")
	}
	t0 := time.Now()
	s.Close()
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("Close took %v with a request in the latency wait", d)
	}
	// The client sees an error (connection closed or refused), in any case
	// well before the minute of latency.
	select {
	case err := <-errc:
		if err == nil {
			t.Error("Attrs succeeded against a closed server")
		}
	case <-ctx.Done():
		t.Fatal("client call did not end after Close")
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		method, url string
		want        target
	}{
		{"GET", "/storage/v1/b/bk/o/a%2Fb?alt=media&generation=3", target{"bk", "a/b", true}},
		{"GET", "/storage/v1/b/bk/o/a%2Fb", target{"bk", "a/b", false}},
		{"HEAD", "/storage/v1/b/bk/o/a?alt=media", target{"bk", "a", false}},
		{"GET", "/storage/v1/b/bk/o?prefix=x", target{"bk", "", false}},
		{"GET", "/storage/v1/b/bk", target{"bk", "", false}},
		{"GET", "/storage/v1/b", target{}},
		{"GET", "/download/storage/v1/b/bk/o/bad%2F%2Fname?alt=media", target{"bk", "bad//name", true}},
		{"POST", "/upload/storage/v1/b/bk/o?uploadType=resumable&name=x", target{"bk", "", false}},
		{"PUT", "/upload/resumable/abc", target{}},
		{"GET", "/bk/dir/file%20x", target{"bk", "dir/file x", true}},
		{"GET", "/bk/bad%2F%2Fname", target{"bk", "bad//name", true}},
		{"GET", "/bk", target{"bk", "", false}},
		{"GET", "/_internal/healthcheck", target{}},
	} {
		r := httptest.NewRequest(tc.method, tc.url, nil)
		if got := classify(r); got != tc.want {
			t.Errorf("%s %s: got %+v, want %+v", tc.method, tc.url, got, tc.want)
		}
	}
}
