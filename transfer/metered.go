package transfer

import (
	"context"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Observer is told about every call made through a Metered bucket or a
// MeteredMultipart. Its methods are called on the calling goroutine, by
// many goroutines at once; they must be quick and must not block.
//
// Method names are the Bucket method in lower case ("stat", "list",
// "read", "put", "compose", "delete", "check") and, for the XML multipart
// API, "multipart_initiate", "multipart_upload_part",
// "multipart_complete", "multipart_abort", "multipart_list".
type Observer interface {
	// Started is called when a call begins.
	Started(method string)
	// Finished is called when it ends: how long it took, how many object
	// bytes it moved (downloaded by "read", uploaded by "put" and
	// "multipart_upload_part"; 0 otherwise) and its error (nil on
	// success), classified by the caller with the sentinels of this
	// package.
	Finished(method string, d time.Duration, bytes int64, err error)
	// Retried is called when the client sends one more HTTP request for a
	// call that already sent one: the storage client's own retries of
	// idempotent calls, and a range read reopened after its stream broke.
	// Retries bucketfs makes itself (the parts of a parallel upload, a
	// failed upload tried again later) are new calls, not Retried.
	Retried(method string)
}

// Metered reports every call to the wrapped bucket to an Observer. Put it
// directly around the GCS bucket (inside Limited), so that durations are
// those of the requests, not of the wait for a slot.
type Metered struct {
	b        Bucket
	o        Observer
	inFlight atomic.Int64
}

var _ Bucket = (*Metered)(nil)

// NewMetered wraps b so that every call is reported to o.
func NewMetered(b Bucket, o Observer) *Metered {
	return &Metered{b: b, o: o}
}

// InFlight is the number of calls running now.
func (m *Metered) InFlight() int64 { return m.inFlight.Load() }

// call tags the ctx of one metered call, so that the HTTP transport of
// NewGCS can count the requests the call sends (see AttemptCounter).
// call.mu is a leaf lock, held only to look up and record a request key.
type call struct {
	method string
	o      Observer

	mu   sync.Mutex
	sent []string // guarded by mu: method and URL of each request sent
}

// sentBefore records that req is being sent and reports whether the same
// request (method and URL) was sent before in this call: a retry. The
// next page of a listing has another URL (its page token), a retried
// request the same.
func (c *call) sentBefore(req *http.Request) bool {
	key := req.Method + " " + req.URL.String()
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.Contains(c.sent, key) {
		return true
	}
	c.sent = append(c.sent, key)
	return false
}

type callKey struct{}

func (m *Metered) begin(ctx context.Context, method string) (context.Context, time.Time) {
	m.inFlight.Add(1)
	m.o.Started(method)
	return context.WithValue(ctx, callKey{}, &call{method: method, o: m.o}), time.Now()
}

func (m *Metered) end(method string, start time.Time, n int64, err error) {
	m.o.Finished(method, time.Since(start), n, err)
	m.inFlight.Add(-1)
}

// Name implements Bucket.
func (m *Metered) Name() string { return m.b.Name() }

// Stat implements Bucket.
func (m *Metered) Stat(ctx context.Context, name string) (ObjectAttrs, error) {
	ctx, t := m.begin(ctx, "stat")
	a, err := m.b.Stat(ctx, name)
	m.end("stat", t, 0, err)
	return a, err
}

// List implements Bucket.
func (m *Metered) List(ctx context.Context, q ListQuery) (ListPage, error) {
	ctx, t := m.begin(ctx, "list")
	p, err := m.b.List(ctx, q)
	m.end("list", t, 0, err)
	return p, err
}

// ReadRange implements Bucket.
func (m *Metered) ReadRange(ctx context.Context, name string, gen, off, length int64, w io.Writer) (int64, error) {
	ctx, t := m.begin(ctx, "read")
	n, err := m.b.ReadRange(ctx, name, gen, off, length, w)
	m.end("read", t, n, err)
	return n, err
}

// Put implements Bucket. The bytes counted are those the upload read from
// r, sent or not.
func (m *Metered) Put(ctx context.Context, name string, r io.Reader, o PutOptions) (ObjectAttrs, error) {
	ctx, t := m.begin(ctx, "put")
	cr := &countingReader{r: r}
	var body io.Reader = cr
	if ra, ok := r.(sizedReaderAt); ok {
		// Still a body that can be read again (a resumable upload
		// resumes from it): its bytes are counted as they are read.
		body = &meteredBody{countingReader: cr, ra: ra}
	}
	a, err := m.b.Put(ctx, name, body, o)
	m.end("put", t, cr.n, err)
	return a, err
}

// Compose implements Bucket. Its bytes never leave the store: 0 counted.
func (m *Metered) Compose(ctx context.Context, dst string, srcs []string, o PutOptions) (ObjectAttrs, error) {
	ctx, t := m.begin(ctx, "compose")
	a, err := m.b.Compose(ctx, dst, srcs, o)
	m.end("compose", t, 0, err)
	return a, err
}

// Copy implements Bucket.
func (m *Metered) Copy(ctx context.Context, src string, srcGen int64, dst string, o PutOptions) (ObjectAttrs, error) {
	ctx, t := m.begin(ctx, "copy")
	a, err := m.b.Copy(ctx, src, srcGen, dst, o)
	m.end("copy", t, 0, err)
	return a, err
}

// RenameFolder implements Bucket.
func (m *Metered) RenameFolder(ctx context.Context, from, to string) error {
	ctx, t := m.begin(ctx, "renamefolder")
	err := m.b.RenameFolder(ctx, from, to)
	m.end("renamefolder", t, 0, err)
	return err
}

// DeleteEmptyFolders implements Bucket.
func (m *Metered) DeleteEmptyFolders(ctx context.Context, prefix string) error {
	ctx, t := m.begin(ctx, "deletefolders")
	err := m.b.DeleteEmptyFolders(ctx, prefix)
	m.end("deletefolders", t, 0, err)
	return err
}

// SetMetadata implements Bucket.
func (m *Metered) SetMetadata(ctx context.Context, name string, gen int64, md map[string]string) (ObjectAttrs, error) {
	ctx, t := m.begin(ctx, "setmetadata")
	a, err := m.b.SetMetadata(ctx, name, gen, md)
	m.end("setmetadata", t, 0, err)
	return a, err
}

// Delete implements Bucket.
func (m *Metered) Delete(ctx context.Context, name string, gen int64) error {
	ctx, t := m.begin(ctx, "delete")
	err := m.b.Delete(ctx, name, gen)
	m.end("delete", t, 0, err)
	return err
}

// CheckAccess implements Bucket.
func (m *Metered) CheckAccess(ctx context.Context) error {
	ctx, t := m.begin(ctx, "check")
	err := m.b.CheckAccess(ctx)
	m.end("check", t, 0, err)
	return err
}

// countingReader counts the bytes read through it. Put reads its body on
// one goroutine (the client's), and the count is read after Put returns.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// meteredBody is a countingReader of a body that can be read
// again: bytes read at an offset count too (each time they are read,
// as each time they are sent). Not for concurrent use.
type meteredBody struct {
	*countingReader
	ra sizedReaderAt
}

func (c *meteredBody) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.ra.ReadAt(p, off)
	c.n += int64(n)
	return n, err
}

func (c *meteredBody) Size() int64 { return c.ra.Size() }

// MeteredMultipart reports every call to the wrapped XML multipart API to
// an Observer, as Metered does for a Bucket.
type MeteredMultipart struct {
	m MultipartAPI
	b *Metered // shares its in-flight count and observer
}

var _ MultipartAPI = (*MeteredMultipart)(nil)

// Multipart wraps mp so that its calls are reported like the bucket's.
func (m *Metered) Multipart(mp MultipartAPI) *MeteredMultipart {
	return &MeteredMultipart{m: mp, b: m}
}

// Initiate implements MultipartAPI.
func (mm *MeteredMultipart) Initiate(ctx context.Context, name string) (string, error) {
	ctx, t := mm.b.begin(ctx, "multipart_initiate")
	id, err := mm.m.Initiate(ctx, name)
	mm.b.end("multipart_initiate", t, 0, err)
	return id, err
}

// UploadPart implements MultipartAPI; size bytes are counted when it
// succeeds.
func (mm *MeteredMultipart) UploadPart(ctx context.Context, name, uploadID string, n int, r io.ReaderAt, size int64, sum uint32) (string, error) {
	ctx, t := mm.b.begin(ctx, "multipart_upload_part")
	etag, err := mm.m.UploadPart(ctx, name, uploadID, n, r, size, sum)
	var sent int64
	if err == nil {
		sent = size
	}
	mm.b.end("multipart_upload_part", t, sent, err)
	return etag, err
}

// Complete implements MultipartAPI.
func (mm *MeteredMultipart) Complete(ctx context.Context, name, uploadID string, parts []CompletedPart) (ObjectAttrs, error) {
	ctx, t := mm.b.begin(ctx, "multipart_complete")
	a, err := mm.m.Complete(ctx, name, uploadID, parts)
	mm.b.end("multipart_complete", t, 0, err)
	return a, err
}

// Abort implements MultipartAPI.
func (mm *MeteredMultipart) Abort(ctx context.Context, name, uploadID string) error {
	ctx, t := mm.b.begin(ctx, "multipart_abort")
	err := mm.m.Abort(ctx, name, uploadID)
	mm.b.end("multipart_abort", t, 0, err)
	return err
}

// ListUploads implements MultipartAPI.
func (mm *MeteredMultipart) ListUploads(ctx context.Context, prefix string) ([]PendingUpload, error) {
	ctx, t := mm.b.begin(ctx, "multipart_list")
	u, err := mm.m.ListUploads(ctx, prefix)
	mm.b.end("multipart_list", t, 0, err)
	return u, err
}

// AttemptCounter is an HTTP transport that counts the requests each
// metered call sends: a request a call has sent before (same method and
// URL) is reported to the call's Observer as a retry. Requests whose context carries no
// metered call (token refreshes, calls not made through Metered) pass
// untouched. NewGCS puts it around its transport.
type AttemptCounter struct {
	Base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (a *AttemptCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if c, ok := req.Context().Value(callKey{}).(*call); ok {
		if c.sentBefore(req) {
			c.o.Retried(c.method)
		}
	}
	return a.Base.RoundTrip(req)
}
