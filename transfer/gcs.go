package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/bucketfs/bucketfs/internal/crc32c"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	rawstorage "google.golang.org/api/storage/v1"
)

// GCSOptions configure a GCS bucket client.
type GCSOptions struct {
	// Endpoint is the base URL of a GCS-compatible JSON API, such as an
	// emulator at "http://127.0.0.1:4443". "" means Google's public endpoint.
	// A URL without a path gets "/storage/v1/" appended.
	Endpoint string
	// Anonymous sends no credentials (public buckets, emulators).
	Anonymous bool
	// MaxConnsPerHost is how many idle connections to keep per host; it
	// should be at least the number of concurrent requests bucketfs makes
	// (over HTTP/1.1, each has a connection of its own).
	MaxConnsPerHost int
	// Protocol is the HTTP version spoken to the bucket: HTTP1 ("" too)
	// or HTTP2 (transport.go).
	Protocol Protocol
	// CAFile, if set, names PEM certificates trusted besides the
	// system's: a private endpoint, or an emulator over TLS.
	CAFile string
	// UserAgent is appended to the client's user agent.
	UserAgent string
	// Breaker, if not nil, puts a circuit breaker on the client (see
	// Breaker): an unreachable bucket is detected within seconds and
	// calls then fail at once with ErrOffline.
	Breaker *BreakerOptions
	// StallTimeout: a read or upload with no progress for this long is
	// cancelled (stall.go); 0 means DefaultStallTimeout, < 0 never.
	StallTimeout time.Duration
	// ResumableThreshold: a Put of a body Put can read again (an
	// *io.SectionReader) this big or bigger is a resumable upload,
	// resumed after a break (resumable.go); 0 means
	// DefaultResumableThreshold, < 0 never (PutOptions.Resumable still
	// asks for one).
	ResumableThreshold int64
}

// GCS is a Bucket in Google Cloud Storage, reached through the official
// client over the JSON API (reads too, so that emulators work).
type GCS struct {
	name   string
	client *storage.Client
	h      *storage.BucketHandle
	http   *http.Client // the client's transport, with credentials
	xmlURL string       // base URL of the XML API, for Multipart
	// uploadURL is the base of the JSON API's uploads, ending in
	// "/upload/storage/v1/" (resumable.go).
	uploadURL   string
	resumableAt int64               // see GCSOptions.ResumableThreshold; <= 0: only when asked
	resumeWait  time.Duration       // defaultResumeWait; shorter in tests
	raw         *rawstorage.Service // the JSON API itself, for folders (folder.go)
	hns         hnsState
	br          *Breaker      // nil without GCSOptions.Breaker
	stall       time.Duration // see GCSOptions.StallTimeout; <= 0: not watched
}

var _ Bucket = (*GCS)(nil)

// NewGCS makes a client for bucket. It does not talk to the bucket; call
// CheckAccess for that. Missing credentials are reported here, wrapped in
// ErrUnauthenticated.
func NewGCS(ctx context.Context, bucket string, o GCSOptions) (*GCS, error) {
	if err := ValidBucketName(bucket); err != nil {
		return nil, err
	}
	base, err := newTransport(o)
	if err != nil {
		return nil, err
	}
	var inner http.RoundTripper = storedBytesTransport{base}
	var br *Breaker
	if o.Breaker != nil {
		// Inside the counter, so that it sees each request the library
		// sends, retries included, and its own refusals are counted too.
		br = newBreaker(*o.Breaker)
		inner = br.Transport(inner)
	}
	if !o.Anonymous {
		// Outside the breaker: a token the metadata server refuses says
		// nothing of whether the bucket can be reached (credentials.go).
		if inner, err = withCredentials(ctx, inner); err != nil {
			return nil, err
		}
	}
	// Outermost, so that it sees every request a call sends (retries
	// included) and reports repeats to a Metered caller.
	hc := &http.Client{Transport: &AttemptCounter{Base: inner}}
	xmlURL := "https://storage.googleapis.com"
	uploadURL := xmlURL + "/upload/storage/v1/"
	opts := []option.ClientOption{
		option.WithHTTPClient(hc),
		storage.WithJSONReads(),
	}
	ep := ""
	if o.Endpoint != "" {
		var err error
		if ep, err = normalizeEndpoint(o.Endpoint); err != nil {
			return nil, err
		}
		opts = append(opts, option.WithEndpoint(ep))
		u, _ := url.Parse(ep)
		xmlURL = u.Scheme + "://" + u.Host
		uploadURL = xmlURL + "/upload" + u.Path
	}
	if o.UserAgent != "" {
		opts = append(opts, option.WithUserAgent(o.UserAgent))
	}
	c, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating storage client: %w", err)
	}
	// Idempotent calls are retried with backoff, bounded so that a dead
	// network surfaces as an error instead of a hang.
	c.SetRetry(
		storage.WithPolicy(storage.RetryIdempotent),
		storage.WithBackoff(gax.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Multiplier: 2}),
		storage.WithMaxRetryDuration(2*time.Minute),
		storage.WithErrorFunc(shouldRetry),
	)
	raw, err := newRawService(ctx, hc, ep, o.UserAgent)
	if err != nil {
		c.Close()
		return nil, err
	}
	stall := o.StallTimeout
	if stall == 0 {
		stall = DefaultStallTimeout
	}
	resumableAt := o.ResumableThreshold
	if resumableAt == 0 {
		resumableAt = DefaultResumableThreshold
	}
	g := &GCS{name: bucket, client: c, h: c.Bucket(bucket), http: hc, xmlURL: xmlURL, uploadURL: uploadURL,
		resumableAt: resumableAt, resumeWait: defaultResumeWait, raw: raw, br: br, stall: stall}
	if br != nil {
		br.start(g.probe)
	}
	return g, nil
}

// shouldRetry is the storage library's rule, except that a request the
// breaker refused (the bucket is offline) is not tried again: the
// breaker's probe, not each call, finds out when it is back.
func shouldRetry(err error) bool {
	if errors.Is(err, ErrOffline) {
		return false
	}
	return storage.ShouldRetry(err)
}

// Breaker returns the client's circuit breaker (nil without one).
func (g *GCS) Breaker() *Breaker { return g.br }

// probe is the breaker's cheap request: a one-item listing.
func (g *GCS) probe(ctx context.Context) error {
	_, err := g.List(ctx, ListQuery{PageSize: 1, Delimiter: "/"})
	return err
}

// Multipart returns a client of the bucket's XML multipart API with the
// same credentials and connections as g. endpoint "" means the XML API of
// g's endpoint: https://storage.googleapis.com, or the host of
// GCSOptions.Endpoint.
func (g *GCS) Multipart(endpoint string) (*Multipart, error) {
	if endpoint == "" {
		endpoint = g.xmlURL
	}
	return NewMultipart(MultipartOptions{Endpoint: endpoint, Bucket: g.name, Client: g.http, StallTimeout: g.stall})
}

// normalizeEndpoint turns "http://host:port" into the JSON API base URL.
func normalizeEndpoint(ep string) (string, error) {
	u, err := url.Parse(ep)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("invalid endpoint %q: want a URL such as http://127.0.0.1:4443", ep)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/storage/v1/"
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u.String(), nil
}

// ValidBucketName checks the syntax of a GCS bucket name, so that a typo
// gets a clear message instead of a confusing HTTP error.
func ValidBucketName(name string) error {
	if len(name) < 3 || len(name) > 222 {
		return fmt.Errorf("invalid bucket name %q: must be 3 to 222 characters", name)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return fmt.Errorf("invalid bucket name %q: only lowercase letters, digits, '-', '_' and '.' are allowed", name)
		}
	}
	if !strings.Contains(name, ".") && len(name) > 63 {
		return fmt.Errorf("invalid bucket name %q: longer than 63 characters (only names with dots may be longer)", name)
	}
	for _, part := range strings.Split(name, ".") {
		if len(part) > 63 {
			return fmt.Errorf("invalid bucket name %q: each dot-separated part may have at most 63 characters", name)
		}
	}
	first, last := name[0], name[len(name)-1]
	if !isAlnum(first) || !isAlnum(last) {
		return fmt.Errorf("invalid bucket name %q: must start and end with a letter or digit", name)
	}
	return nil
}

func isAlnum(b byte) bool { return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }

// Close stops the breaker's probe and releases the client's connections.
func (g *GCS) Close() error {
	if g.br != nil {
		g.br.Close()
	}
	return g.client.Close()
}

// Name implements Bucket.
func (g *GCS) Name() string { return g.name }

// Stat implements Bucket.
func (g *GCS) Stat(ctx context.Context, name string) (ObjectAttrs, error) {
	a, err := g.h.Object(name).Attrs(ctx)
	if err != nil {
		return ObjectAttrs{}, g.wrap("stat", name, err)
	}
	return fromGCS(a), nil
}

// listAttrs are the fields a listing asks for; fewer fields, smaller pages.
var listAttrs = []string{"Name", "Size", "Generation", "Metageneration", "Updated", "ContentType", "ContentEncoding", "Metadata", "CRC32C", "MD5"}

// List implements Bucket.
func (g *GCS) List(ctx context.Context, q ListQuery) (ListPage, error) {
	sq := &storage.Query{Prefix: q.Prefix, Delimiter: q.Delimiter, Projection: storage.ProjectionNoACL,
		StartOffset: q.StartOffset, EndOffset: q.EndOffset,
		IncludeTrailingDelimiter: q.Placeholders && q.Delimiter != ""}
	if err := sq.SetAttrSelection(listAttrs); err != nil {
		return ListPage{}, err
	}
	size := q.PageSize
	if size <= 0 {
		size = 1000
	}
	it := g.h.Objects(ctx, sq)
	var attrs []*storage.ObjectAttrs
	next, err := iterator.NewPager(it, size, q.PageToken).NextPage(&attrs)
	if err != nil {
		return ListPage{}, g.wrap("list", q.Prefix, err)
	}
	page := ListPage{NextPageToken: next}
	for _, a := range attrs {
		if a.Prefix != "" {
			page.Prefixes = append(page.Prefixes, a.Prefix)
			continue
		}
		page.Objects = append(page.Objects, fromGCS(a))
	}
	return page, nil
}

// ReadRange implements Bucket. A request that stalls is taken up by a
// new one (stall.go).
func (g *GCS) ReadRange(ctx context.Context, name string, gen, off, length int64, w io.Writer) (int64, error) {
	what := fmt.Sprintf("read gs://%s/%s#%d", g.name, name, gen)
	return readUnstalled(ctx, g.stall, what, off, length, w, func(ctx context.Context, off, length int64, w io.Writer) (int64, error) {
		return g.readRange(ctx, name, gen, off, length, w)
	})
}

func (g *GCS) readRange(ctx context.Context, name string, gen, off, length int64, w io.Writer) (int64, error) {
	o := g.h.Object(name)
	if gen > 0 {
		o = o.Generation(gen)
	}
	r, err := o.NewRangeReader(ctx, off, length)
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Code == http.StatusRequestedRangeNotSatisfiable {
		return 0, nil // off is at or past the end: the object ended first
	}
	if err != nil {
		return 0, g.wrap("read", name, err)
	}
	defer r.Close()
	n, err := io.Copy(taggedWriter{w}, r)
	if err != nil {
		var we *writeError
		if errors.As(err, &we) {
			return n, we.err
		}
		return n, g.wrap("read", name, err)
	}
	return n, nil
}

// writeError marks an error of the caller's writer, so that ReadRange does
// not dress it up as a bucket error.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }

type taggedWriter struct{ w io.Writer }

func (t taggedWriter) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	if err != nil {
		err = &writeError{err}
	}
	return n, err
}

// conditional applies the preconditions of po to o.
func conditional(o *storage.ObjectHandle, po PutOptions) *storage.ObjectHandle {
	switch {
	case po.Unconditional:
		return o
	case po.IfGenerationMatch == 0:
		return o.If(storage.Conditions{DoesNotExist: true})
	default:
		return o.If(storage.Conditions{GenerationMatch: po.IfGenerationMatch})
	}
}

// Put implements Bucket. A body Put can read again (an
// *io.SectionReader) of GCSOptions.ResumableThreshold bytes or more is
// sent as a resumable upload, resumed after a break or a stall
// (resumable.go). Another body the server stops taking fails with
// ErrStalled (stall.go): the caller sends it again.
func (g *GCS) Put(ctx context.Context, name string, r io.Reader, po PutOptions) (ObjectAttrs, error) {
	if ra, ok := g.resumable(r, po); ok {
		return g.putResumable(ctx, name, ra, po)
	}
	wctx, watch := watchStalls(ctx, g.stall)
	a, err := g.put(wctx, name, stallReader{r, watch}, po)
	if watch.stop() && ctx.Err() == nil {
		noteStall(ctx, "upload")
		return ObjectAttrs{}, fmt.Errorf("put gs://%s/%s: the server took no more of the body for %v: %w", g.name, name, g.stall, ErrStalled)
	}
	return a, err
}

func (g *GCS) put(ctx context.Context, name string, r io.Reader, po PutOptions) (ObjectAttrs, error) {
	w := conditional(g.h.Object(name), po).NewWriter(ctx)
	w.ChunkSize = 0 // one request
	if po.Resumable {
		// A resumable upload session, sent in chunks of this size: the
		// client retries a failed chunk, not the whole object.
		w.ChunkSize = resumableChunk
	}
	w.ContentType = po.ContentType
	w.ContentEncoding = po.ContentEncoding
	w.Metadata = po.Metadata
	w.CRC32C, w.SendCRC32C = po.CRC32C, po.SendCRC32C
	sent := &summingReader{r: r}
	if _, err := io.Copy(w, bufio.NewReaderSize(sent, 256<<10)); err != nil {
		w.CloseWithError(err)
		return ObjectAttrs{}, g.wrap("put", name, err)
	}
	if err := w.Close(); err != nil {
		if po.SendCRC32C && sent.sum != po.CRC32C {
			// The store refused bytes whose checksum is not the one
			// declared: the body changed after its sum was taken (a
			// file written while it was sent). Known from the bytes
			// sent, not from the wording of the answer.
			err = fmt.Errorf("%w: the body sent has CRC32C %08x, the upload declared %08x: %v", ErrChecksum, sent.sum, po.CRC32C, err)
		}
		return ObjectAttrs{}, g.wrapPut(name, err)
	}
	return fromGCS(w.Attrs()), nil
}

// summingReader keeps the CRC-32C of what was read through it.
type summingReader struct {
	r   io.Reader
	sum uint32
}

func (s *summingReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.sum = crc32c.Update(s.sum, p[:n])
	return n, err
}

// wrapPut classifies an upload's error: an upload makes its object, so
// a 404 can only be about the bucket.
func (g *GCS) wrapPut(name string, err error) error {
	e := g.wrap("put", name, err)
	var oe *OpError
	if errors.As(e, &oe) && errors.Is(oe.Err, ErrNotExist) && !errors.Is(oe.Err, ErrBucketNotExist) {
		oe.Err = fmt.Errorf("%w: %v", ErrBucketNotExist, err)
	}
	return e
}

// Compose implements Bucket. The client retries it only when it carries a
// precondition (then it is idempotent).
func (g *GCS) Compose(ctx context.Context, dst string, srcs []string, po PutOptions) (ObjectAttrs, error) {
	if len(srcs) == 0 || len(srcs) > MaxComposeSources {
		return ObjectAttrs{}, &OpError{Op: "compose", Bucket: g.name, Object: dst,
			Err: fmt.Errorf("compose takes 1 to %d sources, not %d", MaxComposeSources, len(srcs))}
	}
	hs := make([]*storage.ObjectHandle, len(srcs))
	for i, s := range srcs {
		hs[i] = g.h.Object(s)
	}
	c := conditional(g.h.Object(dst), po).ComposerFrom(hs...)
	c.ContentType = po.ContentType
	c.ContentEncoding = po.ContentEncoding
	c.Metadata = po.Metadata
	// The store refuses an assembly whose bytes are not these before
	// it is live (a mismatch found after would already be the object).
	c.CRC32C, c.SendCRC32C = po.CRC32C, po.SendCRC32C
	c.DeleteSourceObjects = po.DeleteSources
	a, err := c.Run(ctx)
	if err != nil {
		return ObjectAttrs{}, g.wrap("compose", dst, err)
	}
	return fromGCS(a), nil
}

// Copy implements Bucket with objects.rewrite (the client repeats the call
// until a large object is done).
func (g *GCS) Copy(ctx context.Context, src string, srcGen int64, dst string, po PutOptions) (ObjectAttrs, error) {
	from := g.h.Object(src)
	if srcGen > 0 {
		from = from.Generation(srcGen)
	}
	c := conditional(g.h.Object(dst), po).CopierFrom(from)
	c.ContentType = po.ContentType
	c.Metadata = po.Metadata
	a, err := c.Run(ctx)
	if err != nil {
		return ObjectAttrs{}, g.wrap("copy", dst, err)
	}
	return fromGCS(a), nil
}

// SetMetadata implements Bucket (objects.patch with ifGenerationMatch).
func (g *GCS) SetMetadata(ctx context.Context, name string, gen int64, md map[string]string) (ObjectAttrs, error) {
	a, err := g.h.Object(name).If(storage.Conditions{GenerationMatch: gen}).
		Update(ctx, storage.ObjectAttrsToUpdate{Metadata: md})
	if err != nil {
		return ObjectAttrs{}, g.wrap("setmetadata", name, err)
	}
	return fromGCS(a), nil
}

// Delete implements Bucket.
func (g *GCS) Delete(ctx context.Context, name string, gen int64) error {
	o := g.h.Object(name)
	if gen > 0 {
		o = o.If(storage.Conditions{GenerationMatch: gen})
	}
	if err := o.Delete(ctx); err != nil {
		return g.wrap("delete", name, err)
	}
	return nil
}

// CheckAccess implements Bucket with a one-item listing, the permission a
// mount needs anyway (storage.objects.list).
func (g *GCS) CheckAccess(ctx context.Context) error {
	_, err := g.List(ctx, ListQuery{PageSize: 1, Delimiter: "/"})
	if err == nil {
		return nil
	}
	var oe *OpError
	if errors.As(err, &oe) {
		oe.Op = "check"
		if errors.Is(oe.Err, ErrNotExist) {
			// A 404 on a listing can only mean the bucket.
			oe.Err = fmt.Errorf("%w", ErrBucketNotExist)
		}
	}
	return err
}

func fromGCS(a *storage.ObjectAttrs) ObjectAttrs {
	return ObjectAttrs{
		Name:            a.Name,
		Size:            a.Size,
		Generation:      a.Generation,
		Metageneration:  a.Metageneration,
		Updated:         a.Updated,
		ContentType:     a.ContentType,
		ContentEncoding: a.ContentEncoding,
		Metadata:        a.Metadata,
		CRC32C:          a.CRC32C,
		MD5:             a.MD5,
	}
}

// wrap classifies a client error once, at this boundary.
func (g *GCS) wrap(op, object string, err error) error {
	return &OpError{Op: op, Bucket: g.name, Object: object, Err: classify(err)}
}

func classify(err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, storage.ErrBucketNotExist):
		return fmt.Errorf("%w: %v", ErrBucketNotExist, err)
	case errors.Is(err, storage.ErrObjectNotExist):
		return fmt.Errorf("%w: %v", ErrNotExist, err)
	}
	if r := tokenRefusal(err); r != nil {
		return noToken(r)
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		switch ge.Code {
		case http.StatusNotFound:
			return fmt.Errorf("%w: %v", ErrNotExist, err)
		case http.StatusUnauthorized:
			return fmt.Errorf("%w: %v", ErrUnauthenticated, err)
		case http.StatusForbidden:
			return fmt.Errorf("%w: %v", ErrPermission, err)
		case http.StatusPreconditionFailed:
			return fmt.Errorf("%w: %v", ErrPrecondition, err)
		case http.StatusBadRequest:
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	return err
}

// storedBytesTransport asks for the stored bytes of the object a request
// reads when its ctx was made by StoredBytes. The header is set here,
// below the client: the API library refuses requests that carry it (it
// would interfere with Go's transparent decompression, which a request
// that sets it explicitly turns off, as wanted here).
type storedBytesTransport struct{ base http.RoundTripper }

func (t storedBytesTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && wantsStoredBytes(req.Context()) {
		req = req.Clone(req.Context())
		req.Header.Set("Accept-Encoding", "gzip")
	}
	return t.base.RoundTrip(req)
}
