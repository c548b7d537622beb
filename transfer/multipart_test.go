package transfer

// The multipart tests run Multipart against versitygw, an S3-compatible
// server on this machine (scripts/deps.sh installs it), signing with
// SigV4Transport; a few run against httptest servers that answer like
// emulators or like GCS in cases versitygw cannot produce.
//
// No local server covers, so check them against a real GCS bucket before
// relying on a change there:
//   - GCS's OAuth Bearer authentication (an oauth2.Transport as Client);
//   - the x-goog-generation header of Complete (versitygw sends none, so
//     Generation is 0 here);
//   - GCS's own error bodies and statuses (its <Details>, its codes).

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/crc32c"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

const (
	s3AccessKey = "bucketfs-test"
	s3SecretKey = "bucketfs-test-secret"
	s3Bucket    = "multipart-test"
)

// TestMain stops the versitygw server that the tests may have started,
// and makes the process one on a VM for the credential tests (asVM).
func TestMain(m *testing.M) {
	decideOnVM()
	code := m.Run()
	s3Shared.stop()
	os.Exit(code)
}

// s3Shared is the one versitygw server of this test binary, started by the
// first test that needs it.
var s3Shared s3Once

type s3Once struct {
	once sync.Once
	srv  *s3Server
	err  error
}

func (o *s3Once) stop() {
	if o.srv != nil {
		o.srv.stop()
	}
}

// s3Server is a running versitygw whose data lives in dir.
type s3Server struct {
	url  string
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	out  *lockedBuffer
}

// needS3 returns the shared server, starting it on first use. A missing
// versitygw fails the test, unless BUCKETFS_NO_S3=1 asks to skip.
func needS3(t *testing.T) *s3Server {
	t.Helper()
	if os.Getenv("BUCKETFS_NO_S3") == "1" {
		t.Skip("BUCKETFS_NO_S3=1: not testing against versitygw")
	}
	s3Shared.once.Do(func() { s3Shared.srv, s3Shared.err = startS3() })
	if s3Shared.err != nil {
		t.Fatal(s3Shared.err)
	}
	return s3Shared.srv
}

// startS3 starts versitygw on a free port over a new temporary directory and
// creates s3Bucket in it.
func startS3() (*s3Server, error) {
	bin, err := testutil.FindVersitygw()
	if err != nil {
		return nil, fmt.Errorf("the S3-compatible server of the multipart tests: %w: run scripts/deps.sh, or set BUCKETFS_NO_S3=1 to skip these tests", err)
	}
	dir, err := os.MkdirTemp("", "bucketfs-versitygw-")
	if err != nil {
		return nil, err
	}
	// The port is free when we look but may be taken before versitygw
	// binds it: try a few.
	for attempt := 0; ; attempt++ {
		s, err := startS3On(bin, dir)
		if err == nil {
			if err := s.createBucket(s3Bucket); err != nil {
				s.stop()
				return nil, err
			}
			return s, nil
		}
		if attempt == 2 || !strings.Contains(err.Error(), "address already in use") {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

func startS3On(bin, dir string) (*s3Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()

	s := &s3Server{url: "http://" + addr, dir: dir, done: make(chan struct{}), out: &lockedBuffer{}}
	s.cmd = exec.Command(bin, "--quiet", "--port", addr, "posix", dir)
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s3AccessKey, "ROOT_SECRET_KEY="+s3SecretKey)
	s.cmd.Stdout = s.out
	s.cmd.Stderr = s.out
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		s.cmd.Wait()
		close(s.done)
	}()

	// Ready when it answers HTTP at all (an unsigned request gets an error
	// status, which is fine).
	probe := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := probe.Get(s.url + "/")
		if err == nil {
			drain(resp.Body)
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("versitygw exited at start: %s", s.out.String())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("versitygw did not answer on %s within 30s: %v; output: %s", addr, err, s.out.String())
		}
	}
}

// stop kills the server, waits for it and removes its data.
func (s *s3Server) stop() {
	s.cmd.Process.Kill()
	<-s.done
	os.RemoveAll(s.dir)
}

// client returns an HTTP client that signs with secret.
func (s *s3Server) client(secret string) *http.Client {
	return &http.Client{Transport: &SigV4Transport{AccessKey: s3AccessKey, SecretKey: secret}}
}

func (s *s3Server) createBucket(bucket string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.url+"/"+bucket, nil)
	if err != nil {
		return err
	}
	resp, err := s.client(s3SecretKey).Do(req)
	if err != nil {
		return fmt.Errorf("creating bucket %s: %w", bucket, err)
	}
	body, _ := readLimited(resp.Body, maxErrorBody)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("creating bucket %s: HTTP %d: %s", bucket, resp.StatusCode, body)
	}
	return nil
}

// multipart returns a client of bucket on s signing with secret.
func (s *s3Server) multipart(t *testing.T, bucket, secret string) *Multipart {
	t.Helper()
	m, err := NewMultipart(MultipartOptions{Endpoint: s.url, Bucket: bucket, Client: s.client(secret), S3: true})
	if err != nil {
		t.Fatalf("NewMultipart: %v", err)
	}
	return m
}

// get reads object name of s3Bucket with a signed GET and returns its bytes
// and the HTTP status.
func (s *s3Server) get(ctx context.Context, t *testing.T, name string) ([]byte, int) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/"+s3Bucket+"/"+uriEncode(name, true), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.client(s3SecretKey).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", name, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", name, err)
	}
	return data, resp.StatusCode
}

// lockedBuffer collects a process's output, written by os/exec's copying
// goroutine and read by the tests.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// objSeq makes object names unique across -count runs, which share the
// server.
var objSeq atomic.Int64

// objName returns a fresh object name for this test.
func objName(t *testing.T, suffix string) string {
	return fmt.Sprintf("%s-%d/%s", t.Name(), objSeq.Add(1), suffix)
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// uploadParts uploads parts[i] as part i+1, concurrently, starting with the
// last, and returns their ETags in part order.
func uploadParts(ctx context.Context, t *testing.T, m *Multipart, name, id string, parts [][]byte) []CompletedPart {
	t.Helper()
	done := make([]CompletedPart, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i := len(parts) - 1; i >= 0; i-- {
		wg.Go(func() {
			etag, err := m.UploadPart(ctx, name, id, i+1, bytes.NewReader(parts[i]), int64(len(parts[i])), crc32c.Checksum(parts[i]))
			done[i], errs[i] = CompletedPart{Number: i + 1, ETag: etag}, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("UploadPart: %v", err)
	}
	return done
}

func TestMultipartUpload(t *testing.T) {
	t.Parallel()
	s := needS3(t)
	ctx := testutil.Ctx(t, 2*time.Minute)
	m := s.multipart(t, s3Bucket, s3SecretKey)
	name := objName(t, "big.bin")

	id, err := m.Initiate(ctx, name)
	if err != nil {
		t.Fatalf("Initiate: %v", err)
	}
	parts := [][]byte{randomBytes(t, 5<<20), randomBytes(t, 5<<20), randomBytes(t, 1<<20)}
	done := uploadParts(ctx, t, m, name, id, parts)
	t.Logf("parts: %+v", done)

	// Out of order on purpose: Complete sorts.
	slices.Reverse(done)
	attrs, err := m.Complete(ctx, name, id, done)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if attrs.Name != name || attrs.Generation != 0 {
		t.Errorf("Complete = %+v, want Name %q and Generation 0 (versitygw sends no x-goog-generation)", attrs, name)
	}
	got, status := s.get(ctx, t, name)
	if want := bytes.Join(parts, nil); status != http.StatusOK || !bytes.Equal(got, want) {
		t.Fatalf("GET after Complete: HTTP %d, %d bytes, want %d bytes equal to the parts", status, len(got), len(want))
	}
	pending, err := m.ListUploads(ctx, name)
	if err != nil || len(pending) != 0 {
		t.Errorf("ListUploads after Complete = %v, %v; want none", pending, err)
	}
}

func TestMultipartRetriedPart(t *testing.T) {
	t.Parallel()
	s := needS3(t)
	ctx := testutil.Ctx(t, 2*time.Minute)
	m := s.multipart(t, s3Bucket, s3SecretKey)
	name := objName(t, "retried.bin")

	id, err := m.Initiate(ctx, name)
	if err != nil {
		t.Fatalf("Initiate: %v", err)
	}
	first, second, last := randomBytes(t, 5<<20), randomBytes(t, 5<<20), randomBytes(t, 1000)
	etag1, err := m.UploadPart(ctx, name, id, 1, bytes.NewReader(first), int64(len(first)), crc32c.Checksum(first))
	if err != nil {
		t.Fatalf("UploadPart 1 (first try): %v", err)
	}
	etag1b, err := m.UploadPart(ctx, name, id, 1, bytes.NewReader(second), int64(len(second)), crc32c.Checksum(second))
	if err != nil {
		t.Fatalf("UploadPart 1 (second try): %v", err)
	}
	if etag1 == etag1b {
		t.Fatalf("both tries of part 1 have ETag %s", etag1)
	}
	etag2, err := m.UploadPart(ctx, name, id, 2, bytes.NewReader(last), int64(len(last)), crc32c.Checksum(last))
	if err != nil {
		t.Fatalf("UploadPart 2: %v", err)
	}
	if _, err := m.Complete(ctx, name, id, []CompletedPart{{1, etag1b}, {2, etag2}}); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	got, status := s.get(ctx, t, name)
	if status != http.StatusOK || !bytes.Equal(got, append(second, last...)) {
		t.Fatalf("GET: HTTP %d, %d bytes; want the second try of part 1 then part 2", status, len(got))
	}
}

func TestMultipartAbort(t *testing.T) {
	t.Parallel()
	s := needS3(t)
	ctx := testutil.Ctx(t, time.Minute)
	m := s.multipart(t, s3Bucket, s3SecretKey)
	name := objName(t, "aborted.bin")

	id, err := m.Initiate(ctx, name)
	if err != nil {
		t.Fatalf("Initiate: %v", err)
	}
	data := randomBytes(t, 1000)
	etag, err := m.UploadPart(ctx, name, id, 1, bytes.NewReader(data), int64(len(data)), crc32c.Checksum(data))
	if err != nil {
		t.Fatalf("UploadPart: %v", err)
	}
	if err := m.Abort(ctx, name, id); err != nil {
		t.Fatalf("Abort: %v", err)
	}

	_, err = m.UploadPart(ctx, name, id, 2, bytes.NewReader(data), int64(len(data)), crc32c.Checksum(data))
	assertOpErr(t, err, "upload-part", ErrNotExist)
	_, err = m.Complete(ctx, name, id, []CompletedPart{{1, etag}})
	assertOpErr(t, err, "complete", ErrNotExist)
	assertOpErr(t, m.Abort(ctx, name, id), "abort", ErrNotExist)

	pending, err := m.ListUploads(ctx, name)
	if err != nil {
		t.Fatalf("ListUploads: %v", err)
	}
	for _, p := range pending {
		if p.UploadID == id {
			t.Errorf("ListUploads still lists the aborted upload: %+v", p)
		}
	}
	if _, status := s.get(ctx, t, name); status != http.StatusNotFound {
		t.Errorf("GET of the aborted object: HTTP %d, want 404", status)
	}
}

// abortLater aborts the upload when the test ends, if it is still pending.
func abortLater(t *testing.T, m *Multipart, name, id string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.Abort(ctx, name, id)
	})
}

// assertOpErr checks that err is an *OpError of op wrapping want.
func assertOpErr(t *testing.T, err error, op string, want error) {
	t.Helper()
	var oe *OpError
	if !errors.As(err, &oe) || oe.Op != op || !errors.Is(err, want) {
		t.Errorf("got error %v, want an *OpError of %q wrapping %q", err, op, want)
	}
}

func TestMultipartListUploads(t *testing.T) {
	t.Parallel()
	s := needS3(t)
	ctx := testutil.Ctx(t, time.Minute)
	m := s.multipart(t, s3Bucket, s3SecretKey)
	base := objName(t, "")
	start := time.Now()

	want := map[string]string{} // upload ID -> name, under a/
	for _, name := range []string{base + "a/x", base + "a/y/z", base + "b/x"} {
		id, err := m.Initiate(ctx, name)
		if err != nil {
			t.Fatalf("Initiate %s: %v", name, err)
		}
		abortLater(t, m, name, id)
		if strings.HasPrefix(name, base+"a/") {
			want[id] = name
		}
	}

	got, err := m.ListUploads(ctx, base+"a/")
	if err != nil {
		t.Fatalf("ListUploads: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("ListUploads(%q) = %+v, want the %d uploads %v", base+"a/", got, len(want), want)
	}
	for _, p := range got {
		if want[p.UploadID] != p.Name {
			t.Errorf("ListUploads lists %+v, want only %v", p, want)
		}
		// The server's clock is ours, at a resolution of a second.
		if p.Initiated.Before(start.Add(-2*time.Second)) || p.Initiated.After(time.Now().Add(2*time.Second)) {
			t.Errorf("upload %s initiated at %v, want between %v and now", p.Name, p.Initiated, start)
		}
	}
}

func TestMultipartPartTooSmall(t *testing.T) {
	t.Parallel()
	s := needS3(t)
	ctx := testutil.Ctx(t, time.Minute)
	m := s.multipart(t, s3Bucket, s3SecretKey)
	name := objName(t, "small-parts.bin")

	id, err := m.Initiate(ctx, name)
	if err != nil {
		t.Fatalf("Initiate: %v", err)
	}
	abortLater(t, m, name, id)
	done := uploadParts(ctx, t, m, name, id, [][]byte{randomBytes(t, 1<<20), randomBytes(t, 1000)})
	_, err = m.Complete(ctx, name, id, done)
	if err == nil {
		t.Fatal("Complete accepted a 1 MiB part before the last one")
	}
	t.Logf("Complete with a small part: %v", err)
	if !strings.Contains(err.Error(), "EntityTooSmall") {
		t.Errorf("error %q does not name the server's code EntityTooSmall", err)
	}
	if _, status := s.get(ctx, t, name); status != http.StatusNotFound {
		t.Errorf("GET after the refused Complete: HTTP %d, want 404", status)
	}
}

func TestMultipartBadSecret(t *testing.T) {
	t.Parallel()
	s := needS3(t)
	ctx := testutil.Ctx(t, time.Minute)
	m := s.multipart(t, s3Bucket, "not-the-secret")
	name := objName(t, "x")

	_, err := m.Initiate(ctx, name)
	if !errors.Is(err, ErrPermission) && !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("Initiate with a wrong secret: %v, want ErrPermission or ErrUnauthenticated", err)
	}
	t.Logf("wrong secret: %v", err)
	_, err = m.ListUploads(ctx, "")
	if !errors.Is(err, ErrPermission) && !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("ListUploads with a wrong secret: %v, want ErrPermission or ErrUnauthenticated", err)
	}
}

func TestMultipartNoBucket(t *testing.T) {
	t.Parallel()
	s := needS3(t)
	ctx := testutil.Ctx(t, time.Minute)
	m := s.multipart(t, "no-such-bucket", s3SecretKey)

	_, err := m.Initiate(ctx, "x")
	assertOpErr(t, err, "initiate", ErrBucketNotExist)
	_, err = m.ListUploads(ctx, "")
	assertOpErr(t, err, "list-uploads", ErrBucketNotExist)
}

func TestMultipartSpecialName(t *testing.T) {
	t.Parallel()
	s := needS3(t)
	ctx := testutil.Ctx(t, time.Minute)
	m := s.multipart(t, s3Bucket, s3SecretKey)
	dir := objName(t, "spa ce")
	name := dir + "/ünï cødé+plus %41percent #hash ?query &and=eq;.txt"

	id, err := m.Initiate(ctx, name)
	if err != nil {
		t.Fatalf("Initiate: %v", err)
	}
	pending, err := m.ListUploads(ctx, dir+"/")
	if err != nil || len(pending) != 1 || pending[0].Name != name || pending[0].UploadID != id {
		t.Fatalf("ListUploads = %+v, %v; want the one upload of %q", pending, err, name)
	}
	data := randomBytes(t, 1000)
	done := uploadParts(ctx, t, m, name, id, [][]byte{data})
	if _, err := m.Complete(ctx, name, id, done); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if got, status := s.get(ctx, t, name); status != http.StatusOK || !bytes.Equal(got, data) {
		t.Errorf("GET: HTTP %d, %d bytes, want the %d bytes uploaded", status, len(got), len(data))
	}
	// The posix backend keeps an object at bucket/name: the name the server
	// understood is exactly ours.
	got, err := os.ReadFile(filepath.Join(s.dir, s3Bucket, filepath.FromSlash(name)))
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("the server's file for %q: %d bytes, %v; want the %d bytes uploaded", name, len(got), err, len(data))
	}
}

// cancelAfterReader serves data and cancels a context once a read of the
// body reaches the middle.
// It reports reads after UploadPart has returned.
type cancelAfterReader struct {
	t        *testing.T
	data     []byte
	cancel   context.CancelFunc
	passes   atomic.Int32
	returned atomic.Bool
}

func (r *cancelAfterReader) ReadAt(p []byte, off int64) (int, error) {
	if r.returned.Load() {
		r.t.Errorf("part source read at %d after UploadPart returned", off)
	}
	if off == 0 {
		r.passes.Add(1)
	}
	if r.passes.Load() >= 1 && off >= int64(len(r.data)/2) {
		r.cancel()
	}
	n := copy(p, r.data[min(off, int64(len(r.data))):])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func TestMultipartCancel(t *testing.T) {
	t.Parallel()

	t.Run("mid-part", func(t *testing.T) {
		t.Parallel()
		s := needS3(t)
		ctx := testutil.Ctx(t, time.Minute)
		m := s.multipart(t, s3Bucket, s3SecretKey)
		name := objName(t, "cancelled.bin")
		id, err := m.Initiate(ctx, name)
		if err != nil {
			t.Fatalf("Initiate: %v", err)
		}
		abortLater(t, m, name, id)

		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		r := &cancelAfterReader{t: t, data: randomBytes(t, 32<<20), cancel: cancel}
		start := time.Now()
		_, err = m.UploadPart(pctx, name, id, 1, r, int64(len(r.data)), crc32c.Checksum(r.data))
		r.returned.Store(true)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("UploadPart cancelled mid-body: %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("UploadPart took %v to return after cancellation", d)
		}
	})

	t.Run("already-cancelled", func(t *testing.T) {
		t.Parallel()
		m, err := NewMultipart(MultipartOptions{Endpoint: "http://127.0.0.1:1", Bucket: "bkt"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := m.Initiate(ctx, "x"); !errors.Is(err, context.Canceled) {
			t.Errorf("Initiate: %v, want context.Canceled", err)
		}
		data := randomBytes(t, 1000)
		if _, err := m.UploadPart(ctx, "x", "id", 1, bytes.NewReader(data), 1000, 0); !errors.Is(err, context.Canceled) {
			t.Errorf("UploadPart: %v, want context.Canceled", err)
		}
	})

	t.Run("stalled-server", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // never answers
		}))
		defer srv.Close()
		m, err := NewMultipart(MultipartOptions{Endpoint: srv.URL, Bucket: "bkt"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err = m.Initiate(ctx, "x")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Initiate against a stalled server: %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Initiate took %v to return after its deadline", d)
		}
	})
}

// The tests below need no versitygw.

// fakeXMLAPI serves one canned answer per request and records the requests'
// URIs.
type fakeXMLAPI struct {
	mu   sync.Mutex
	uris []string
}

func (f *fakeXMLAPI) serve(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) *Multipart {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.uris = append(f.uris, r.Method+" "+r.RequestURI)
		f.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	m, err := NewMultipart(MultipartOptions{Endpoint: srv.URL + "/base/", Bucket: "bkt"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *fakeXMLAPI) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.uris)
}

// answer returns a handler that replies with status and body.
func answer(status int, contentType, body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func TestMultipartUnsupported(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		status int
		ctype  string
		body   string
		want   error
	}{
		{"404-json", 404, "application/json", `{"error":{"code":404,"message":"Not Found"}}`, ErrMultipartUnsupported},
		{"404-empty", 404, "text/plain", "", ErrMultipartUnsupported},
		{"405", 405, "text/plain", "Method Not Allowed", ErrMultipartUnsupported},
		{"501", 501, "application/xml", "<Error><Code>NotImplemented</Code></Error>", ErrMultipartUnsupported},
		{"200-json", 200, "application/json", `{"kind":"storage#object"}`, ErrMultipartUnsupported},
		{"200-empty", 200, "text/plain", "", ErrMultipartUnsupported},
		{"400-json", 400, "application/json", `{"error":{"code":400,"message":"invalid uploadType"}}`, ErrMultipartUnsupported},
		{"404-no-bucket", 404, "application/xml", "<Error><Code>NoSuchBucket</Code><Message>gone</Message></Error>", ErrBucketNotExist},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := (&fakeXMLAPI{}).serve(t, answer(c.status, c.ctype, c.body))
			ctx := testutil.Ctx(t, 10*time.Second)
			_, err := m.Initiate(ctx, "obj")
			assertOpErr(t, err, "initiate", c.want)
			if c.want != ErrMultipartUnsupported && errors.Is(err, ErrMultipartUnsupported) {
				t.Errorf("Initiate: %v, which is not ErrMultipartUnsupported", err)
			}
			_, err = m.ListUploads(ctx, "")
			assertOpErr(t, err, "list-uploads", c.want)
		})
	}
}

// The emulator (fake-gcs-server) has no XML multipart API: the client
// must say so, so that Parallel switches to composing.
func TestMultipartAgainstEmulator(t *testing.T) {
	t.Parallel()
	emu := startEmulator(t)
	mp, err := newTestGCS(t, emu).Multipart("")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testutil.Ctx(t, 30*time.Second)
	if _, err := mp.Initiate(ctx, StagingPrefix+"0123456789abcdef/object"); !errors.Is(err, ErrMultipartUnsupported) {
		t.Errorf("Initiate against the emulator: %v, want ErrMultipartUnsupported", err)
	}
	if _, err := mp.ListUploads(ctx, StagingPrefix); !errors.Is(err, ErrMultipartUnsupported) {
		t.Errorf("ListUploads against the emulator: %v, want ErrMultipartUnsupported", err)
	}
}

func TestMultipartErrors(t *testing.T) {
	t.Parallel()
	const xmlErr = "<?xml version=\"1.0\"?>\n<Error><Code>%s</Code><Message>%s</Message></Error>"
	for _, c := range []struct {
		name   string
		status int
		body   string
		want   error    // nil: no sentinel
		text   []string // in the error's text
	}{
		{"401", 401, fmt.Sprintf(xmlErr, "AuthenticationRequired", "who are you"), ErrUnauthenticated, nil},
		{"403", 403, fmt.Sprintf(xmlErr, "AccessDenied", "no"), ErrPermission, []string{"403", "AccessDenied", "no"}},
		{"412", 412, fmt.Sprintf(xmlErr, "PreconditionFailed", "changed"), ErrPrecondition, nil},
		{"no-upload", 404, fmt.Sprintf(xmlErr, "NoSuchUpload", "gone"), ErrNotExist, nil},
		{"500", 500, fmt.Sprintf(xmlErr, "InternalError", "try again"), nil, []string{"500", "InternalError", "try again"}},
		{"502-html", 502, "<html>bad gateway</html>", nil, []string{"502", "bad gateway"}},
		{"200-error", 200, fmt.Sprintf(xmlErr, "InternalError", "assembly failed"), nil, []string{"InternalError", "assembly failed"}},
		{"200-no-upload", 200, fmt.Sprintf(xmlErr, "NoSuchUpload", "gone"), ErrNotExist, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := (&fakeXMLAPI{}).serve(t, answer(c.status, "application/xml", c.body))
			_, err := m.Complete(testutil.Ctx(t, 10*time.Second), "obj", "id", []CompletedPart{{1, `"e"`}})
			if err == nil {
				t.Fatal("Complete succeeded")
			}
			var oe *OpError
			if !errors.As(err, &oe) || oe.Op != "complete" || oe.Bucket != "bkt" || oe.Object != "obj" {
				t.Errorf("error %v is not an *OpError of complete on bkt/obj", err)
			}
			for _, s := range []error{ErrUnauthenticated, ErrPermission, ErrPrecondition, ErrNotExist, ErrBucketNotExist, ErrMultipartUnsupported} {
				if is := errors.Is(err, s); is != (s == c.want) {
					t.Errorf("errors.Is(%v, %q) = %v", err, s, is)
				}
			}
			for _, s := range c.text {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestMultipartWire(t *testing.T) {
	t.Parallel()
	f := &fakeXMLAPI{}
	var completeBody string
	m := f.serve(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method == http.MethodPost && r.URL.Query().Has("uploads"):
			io.WriteString(w, `<InitiateMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><UploadId>id/+=1</UploadId></InitiateMultipartUploadResult>`)
		case r.Method == http.MethodPut:
			// GCS's header, with the CRC32C of "part" (0x70fe7f5e) big-endian
			// in base64; no Content-MD5, which would cost a second read.
			if got, want := r.Header.Get("x-goog-hash"), "crc32c=cP5/Xg=="; got != want {
				t.Errorf("x-goog-hash %q, want %q", got, want)
			}
			if got := r.Header.Get("Content-MD5") + r.Header.Get("x-amz-checksum-crc32c"); got != "" {
				t.Errorf("other checksum headers sent to GCS: %q", got)
			}
			w.Header().Set("ETag", `"etag-`+r.URL.Query().Get("partNumber")+`"`)
		case r.Method == http.MethodPost:
			completeBody = string(body)
			w.Header().Set("X-Goog-Generation", "1700000000000001")
			io.WriteString(w, "\n  \n<CompleteMultipartUploadResult><Key>k</Key></CompleteMultipartUploadResult>")
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	ctx := testutil.Ctx(t, 10*time.Second)
	name := "dir/ü +%#?&=.txt"
	id, err := m.Initiate(ctx, name)
	if err != nil || id != "id/+=1" {
		t.Fatalf("Initiate = %q, %v", id, err)
	}
	etag, err := m.UploadPart(ctx, name, id, 7, strings.NewReader("part"), 4, crc32c.Checksum([]byte("part")))
	if err != nil || etag != `"etag-7"` {
		t.Fatalf("UploadPart = %q, %v; want the ETag with its quotes", etag, err)
	}
	attrs, err := m.Complete(ctx, name, id, []CompletedPart{{9, `"b"`}, {7, etag}})
	if err != nil || attrs.Name != name || attrs.Generation != 1700000000000001 {
		t.Fatalf("Complete = %+v, %v; want the generation of x-goog-generation", attrs, err)
	}
	if err := m.Abort(ctx, name, id); err != nil {
		t.Fatalf("Abort: %v", err)
	}

	path := "/base/bkt/dir/%C3%BC%20%2B%25%23%3F%26%3D.txt"
	want := []string{
		"POST " + path + "?uploads",
		"PUT " + path + "?partNumber=7&uploadId=id%2F%2B%3D1",
		"POST " + path + "?uploadId=id%2F%2B%3D1",
		"DELETE " + path + "?uploadId=id%2F%2B%3D1",
	}
	if got := f.requests(); !slices.Equal(got, want) {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantBody := `<CompleteMultipartUpload><Part><PartNumber>7</PartNumber><ETag>&#34;etag-7&#34;</ETag></Part>` +
		`<Part><PartNumber>9</PartNumber><ETag>&#34;b&#34;</ETag></Part></CompleteMultipartUpload>`
	if completeBody != wantBody {
		t.Errorf("Complete sent %s\nwant %s", completeBody, wantBody)
	}
}

func TestMultipartListUploadsPages(t *testing.T) {
	t.Parallel()
	f := &fakeXMLAPI{}
	m := f.serve(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("prefix") != "p +/" {
			t.Errorf("prefix %q", q.Get("prefix"))
		}
		if q.Get("key-marker") == "" {
			io.WriteString(w, `<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>
				<NextKeyMarker>p +/b</NextKeyMarker><NextUploadIdMarker>2</NextUploadIdMarker>
				<Upload><Key>p +/a</Key><UploadId>1</UploadId><Initiated>2024-05-01T10:00:00.000Z</Initiated></Upload>
				<Upload><Key>p +/b</Key><UploadId>2</UploadId><Initiated>2024-05-01T10:00:01.000Z</Initiated></Upload>
				</ListMultipartUploadsResult>`)
			return
		}
		if q.Get("key-marker") != "p +/b" || q.Get("upload-id-marker") != "2" {
			t.Errorf("second page asked with markers %q %q", q.Get("key-marker"), q.Get("upload-id-marker"))
		}
		io.WriteString(w, `<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>
			<Upload><Key>p +/b</Key><UploadId>3</UploadId><Initiated>2024-05-01T10:00:02.000Z</Initiated></Upload>
			</ListMultipartUploadsResult>`)
	})
	got, err := m.ListUploads(testutil.Ctx(t, 10*time.Second), "p +/")
	if err != nil {
		t.Fatalf("ListUploads: %v", err)
	}
	t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	want := []PendingUpload{
		{"p +/a", "1", t0},
		{"p +/b", "2", t0.Add(time.Second)},
		{"p +/b", "3", t0.Add(2 * time.Second)},
	}
	if !slices.EqualFunc(got, want, func(a, b PendingUpload) bool {
		return a.Name == b.Name && a.UploadID == b.UploadID && a.Initiated.Equal(b.Initiated)
	}) {
		t.Errorf("ListUploads = %+v, want %+v", got, want)
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("%d requests, want 2 pages", n)
	}
}

func TestMultipartOptions(t *testing.T) {
	t.Parallel()
	for _, ep := range []string{"", "storage.googleapis.com", "ftp://host", "http://", "https://host/?a=b", "http://u:p@host"} {
		if _, err := NewMultipart(MultipartOptions{Endpoint: ep, Bucket: "bkt"}); err == nil {
			t.Errorf("NewMultipart accepted endpoint %q", ep)
		}
	}
	for _, b := range []string{"", "a/b", "UPPER"} {
		if _, err := NewMultipart(MultipartOptions{Endpoint: "https://storage.googleapis.com", Bucket: b}); err == nil {
			t.Errorf("NewMultipart accepted bucket name %q", b)
		}
	}
	if _, err := NewMultipart(MultipartOptions{Endpoint: "https://storage.googleapis.com/", Bucket: "bkt"}); err != nil {
		t.Errorf("NewMultipart: %v", err)
	}
	m, _ := NewMultipart(MultipartOptions{Endpoint: "http://127.0.0.1:1", Bucket: "bkt"})
	ctx := testutil.Ctx(t, 10*time.Second)
	if _, err := m.UploadPart(ctx, "x", "id", 0, strings.NewReader(""), 0, 0); err == nil {
		t.Error("UploadPart accepted part number 0")
	}
	if _, err := m.UploadPart(ctx, "x", "id", 10001, strings.NewReader(""), 0, 0); err == nil {
		t.Error("UploadPart accepted part number 10001")
	}
	if _, err := m.UploadPart(ctx, "x", "id", 1, strings.NewReader("abc"), 4, 0); err == nil {
		t.Error("UploadPart accepted a source shorter than size")
	}
	if _, err := m.Complete(ctx, "x", "id", []CompletedPart{{1, "a"}, {1, "b"}}); err == nil {
		t.Error("Complete accepted part 1 twice")
	}

	// An empty object name would address the bucket itself (DELETE
	// /bucket deletes it on S3): refused before any request.
	f := &fakeXMLAPI{}
	m = f.serve(t, answer(http.StatusNoContent, "text/plain", ""))
	if _, err := m.Initiate(ctx, ""); err == nil {
		t.Error("Initiate accepted an empty name")
	}
	if err := m.Abort(ctx, "", "id"); err == nil {
		t.Error("Abort accepted an empty name")
	}
	if got := f.requests(); len(got) != 0 {
		t.Errorf("requests sent for an empty name: %q", got)
	}
}

// SigV4Transport: versitygw checks real signatures in the tests above; these
// check the parts against the published example and by hand.

func TestSigV4KnownVector(t *testing.T) {
	t.Parallel()
	// The "GET Object" example of Amazon S3's documentation for Signature
	// Version 4 in the Authorization header.
	req, _ := http.NewRequest(http.MethodGet, "https://examplebucket.s3.amazonaws.com/test.txt", nil)
	req.Header.Set("Range", "bytes=0-9")
	req.Header.Set("X-Amz-Content-Sha256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
	tr := &SigV4Transport{AccessKey: "AKIAIOSFODNN7EXAMPLE", SecretKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
	tr.sign(req, time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC))
	want := "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, " +
		"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, " +
		"Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
	if got := req.Header.Get("Authorization"); got != want {
		t.Errorf("Authorization:\n%s\nwant\n%s", got, want)
	}
	if got := req.Header.Get("X-Amz-Date"); got != "20130524T000000Z" {
		t.Errorf("X-Amz-Date %q", got)
	}
}

func TestSigV4Canonical(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"":                                    "",
		"uploads":                             "uploads=",
		"uploads&prefix=a%2Fb+c":              "prefix=a%2Fb%20c&uploads=",
		"uploadId=x%2By&partNumber=10":        "partNumber=10&uploadId=x%2By",
		"a-b=1&a=2&a=1":                       "a=1&a=2&a-b=1",
		"k=%C3%BC~*'":                         "k=%C3%BC~%2A%27",
		"max-keys=2&prefix=J":                 "max-keys=2&prefix=J",
		"list-type=2&continuation-token=a%3D": "continuation-token=a%3D&list-type=2",
	} {
		if got := canonicalQuery(raw); got != want {
			t.Errorf("canonicalQuery(%q) = %q, want %q", raw, got, want)
		}
	}
	for path, want := range map[string]string{
		"":                         "/",
		"/":                        "/",
		"/b/a b/c+d":               "/b/a%20b/c%2Bd",
		"/b/%C3%BC%20x%2Fy":        "/b/%C3%BC%20x%2Fy",
		"/b/it's(1)*!":             "/b/it%27s%281%29%2A%21",
		"/b/d/%7Etilde-under_dot.": "/b/d/~tilde-under_dot.",
	} {
		u, err := url.Parse("http://h" + path)
		if err != nil {
			t.Fatal(err)
		}
		if got := canonicalURI(u); got != want {
			t.Errorf("canonicalURI(%q) = %q, want %q", path, got, want)
		}
	}
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestSigV4Transport(t *testing.T) {
	t.Parallel()
	var sent *http.Request
	tr := &SigV4Transport{AccessKey: "AK", SecretKey: "SK", Region: "auto", Service: "storage",
		Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent = r
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
		})}
	req, _ := http.NewRequest(http.MethodPut, "https://storage.googleapis.com/b/o?partNumber=1&uploadId=u", strings.NewReader("x"))
	req.Header.Set("Content-MD5", "abc")
	if _, err := tr.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if len(req.Header) != 1 {
		t.Errorf("RoundTrip changed its input's headers: %v", req.Header)
	}
	auth := sent.Header.Get("Authorization")
	for _, s := range []string{"/auto/storage/aws4_request", "SignedHeaders=content-md5;host;x-amz-content-sha256;x-amz-date,"} {
		if !strings.Contains(auth, s) {
			t.Errorf("Authorization %q does not contain %q", auth, s)
		}
	}
	if got := sent.Header.Get("X-Amz-Content-Sha256"); got != "UNSIGNED-PAYLOAD" {
		t.Errorf("x-amz-content-sha256 %q", got)
	}

	bad := &SigV4Transport{Base: tr.Base}
	if _, err := bad.RoundTrip(req); err == nil {
		t.Error("RoundTrip without keys succeeded")
	}
}
