package transfer

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrMultipartUnsupported means the endpoint has no XML multipart upload API:
// it answered an initiate (or a listing of uploads) with 404 and no S3 error
// body, 405, 501, or a success whose body is not the expected XML, as GCS
// emulators do. The caller uploads another way.
var ErrMultipartUnsupported = errors.New("the endpoint has no XML multipart upload API")

const (
	maxErrorBody  = 64 << 10 // how much of an error body is read
	maxResultBody = 16 << 20 // how much of a success body is read (listings)
)

// MultipartOptions configure a Multipart client.
type MultipartOptions struct {
	// Endpoint is the base URL of the XML API, such as
	// "https://storage.googleapis.com". Requests are path-style:
	// {Endpoint}/{Bucket}/{object}.
	Endpoint string
	Bucket   string
	// Client sends the requests and carries the authentication: an
	// oauth2.Transport for GCS (Bearer token), a SigV4Transport for
	// S3-compatible servers or GCS HMAC keys. nil means
	// http.DefaultClient (anonymous).
	Client *http.Client
	// StallTimeout: a part whose body the server stops taking for this
	// long is cancelled with ErrStalled (stall.go); <= 0 never.
	StallTimeout time.Duration
	// S3 says the endpoint is an S3-compatible server, not GCS: a part's
	// CRC32C goes as x-amz-checksum-crc32c (S3's header) instead of
	// x-goog-hash (GCS's), which S3 servers ignore.
	S3 bool
}

// Multipart is a client of the S3-style XML multipart upload API, as GCS
// offers it: Initiate an upload, send its parts (in any order, concurrently,
// each retried on its own by the caller), then Complete it, which makes the
// object appear at once, or Abort it. Until then the object is unchanged and
// the parts are billed storage: abort what you give up, and look for
// leftovers with ListUploads.
//
// A Multipart is safe for concurrent use by many goroutines. It never
// retries: every method sends one request (ListUploads one per page; the
// transport may resend a request that a dead keep-alive connection lost)
// and returns its outcome. Every method honours ctx.
//
// Every error is an *OpError (Op "initiate", "upload-part", "complete",
// "abort" or "list-uploads") wrapping, when the server said so, one of
// ErrUnauthenticated (401), ErrPermission (403), ErrBucketNotExist
// (NoSuchBucket), ErrNotExist (NoSuchUpload: the upload was completed or
// aborted), ErrPrecondition (412) or ErrMultipartUnsupported. Other errors
// name the HTTP status and the server's error code and message.
type Multipart struct {
	base   *url.URL // the endpoint, without a trailing '/'
	bucket string
	client *http.Client
	stall  time.Duration // see MultipartOptions.StallTimeout
	s3     bool          // see MultipartOptions.S3
}

// NewMultipart makes a client. It does not talk to the server: the first
// Initiate tells whether the API exists (ErrMultipartUnsupported).
func NewMultipart(o MultipartOptions) (*Multipart, error) {
	u, err := url.Parse(o.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("invalid multipart endpoint %q: want a URL such as https://storage.googleapis.com", o.Endpoint)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	if err := ValidBucketName(o.Bucket); err != nil {
		return nil, err
	}
	c := o.Client
	if c == nil {
		c = http.DefaultClient
	}
	return &Multipart{base: u, bucket: o.Bucket, client: c, stall: o.StallTimeout, s3: o.S3}, nil
}

// Initiate starts a multipart upload of object name and returns its upload
// ID. An endpoint without the API gives ErrMultipartUnsupported.
func (m *Multipart) Initiate(ctx context.Context, name string) (uploadID string, err error) {
	const op = "initiate"
	req, err := m.newRequest(ctx, http.MethodPost, name, "uploads", nil)
	if err != nil {
		return "", m.opErr(op, name, err)
	}
	var res struct {
		XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
		UploadID string   `xml:"UploadId"`
	}
	if err := m.doXML(op, name, req, &res); err != nil {
		return "", err
	}
	if res.UploadID == "" {
		return "", m.opErr(op, name, fmt.Errorf("%w: no UploadId in the response", ErrMultipartUnsupported))
	}
	return res.UploadID, nil
}

// UploadPart sends part number n (1 to MaxParts) of the upload: size bytes
// of r from offset 0, whose CRC32C is sum. The server checks the part
// against sum (GCS: x-goog-hash; S3: x-amz-checksum-crc32c) and refuses it
// with ErrChecksum if the bytes it got differ: so the caller passes the
// sum of the bytes it means to send (as it read them before), and a part
// changed or damaged since is refused, not stored. r is read only to send
// it (again if the transport resends); the reads may come from another
// goroutine, never two at a time, and none after UploadPart returns: the
// caller keeps r and may reuse or close it then. A source shorter than
// size is an error.
//
// UploadPart returns the ETag as the server sent it, quotes included.
// Sending a part number again replaces that part: Complete then wants the
// new ETag (the old one is refused, as InvalidPart on S3). A part of an
// upload that was completed or aborted gives ErrNotExist.
func (m *Multipart) UploadPart(ctx context.Context, name, uploadID string, n int, r io.ReaderAt, size int64, sum uint32) (etag string, err error) {
	const op = "upload-part"
	if n < 1 || n > MaxParts {
		return "", m.opErr(op, name, fmt.Errorf("part number %d out of range 1..%d", n, MaxParts))
	}
	if size < 0 {
		return "", m.opErr(op, name, fmt.Errorf("negative part size %d", size))
	}
	if uploadID == "" {
		return "", m.opErr(op, name, errors.New("empty upload ID"))
	}
	// The fence stops every body made here from reading r once this
	// function returns, since the transport may still be reading a body
	// from its own goroutine after RoundTrip has returned.
	f := &partFence{}
	defer f.close()
	outer := ctx
	ctx, watch := watchStalls(ctx, m.stall)
	defer watch.stop()
	body := func() io.ReadCloser {
		if size == 0 {
			return http.NoBody
		}
		watch.paused.Store(false) // a body sent (again) from its start
		return &partBody{f: f, r: io.NewSectionReader(r, 0, size), watch: watch}
	}
	q := "partNumber=" + strconv.Itoa(n) + "&uploadId=" + uriEncode(uploadID, false)
	req, err := m.newRequest(ctx, http.MethodPut, name, q, nil)
	if err != nil {
		return "", m.opErr(op, name, err)
	}
	req.Body = body()
	req.GetBody = func() (io.ReadCloser, error) { return body(), nil }
	req.ContentLength = size
	var be [4]byte
	binary.BigEndian.PutUint32(be[:], sum)
	if m.s3 {
		req.Header.Set("x-amz-checksum-crc32c", base64.StdEncoding.EncodeToString(be[:]))
	} else {
		req.Header.Set("x-goog-hash", "crc32c="+base64.StdEncoding.EncodeToString(be[:]))
	}

	resp, err := m.send(op, name, req)
	if err != nil {
		if watch.stop() && outer.Err() == nil {
			noteStall(outer, "upload")
			return "", m.opErr(op, name, fmt.Errorf("the server took no more of part %d for %v: %w", n, m.stall, ErrStalled))
		}
		return "", err
	}
	drain(resp.Body)
	etag = resp.Header.Get("ETag")
	if etag == "" {
		return "", m.opErr(op, name, fmt.Errorf("HTTP %d without an ETag", resp.StatusCode))
	}
	return etag, nil
}

// CompletedPart names one uploaded part for Complete.
type CompletedPart struct {
	Number int
	ETag   string // as UploadPart returned it
}

// Complete assembles the parts into the object, in the order of their
// numbers (Complete sorts a copy of parts; numbers may have gaps). Every
// part but the last must be at least MinPartSize bytes, or the
// server refuses. It returns the new object's name and, where the server
// tells it (GCS's x-goog-generation), its generation; other servers give
// Generation 0, and the caller stats the object if it needs more.
//
// A completed or aborted upload gives ErrNotExist; so does a retried
// Complete whose first attempt succeeded unseen, so a caller that retries
// Complete checks the object before it concludes that the upload is lost.
func (m *Multipart) Complete(ctx context.Context, name, uploadID string, parts []CompletedPart) (ObjectAttrs, error) {
	const op = "complete"
	if uploadID == "" {
		return ObjectAttrs{}, m.opErr(op, name, errors.New("empty upload ID"))
	}
	if len(parts) == 0 {
		return ObjectAttrs{}, m.opErr(op, name, errors.New("no parts"))
	}
	sorted := slices.Clone(parts)
	slices.SortFunc(sorted, func(a, b CompletedPart) int { return a.Number - b.Number })
	type xmlPart struct {
		PartNumber int
		ETag       string
	}
	doc := struct {
		XMLName xml.Name  `xml:"CompleteMultipartUpload"`
		Parts   []xmlPart `xml:"Part"`
	}{}
	for i, p := range sorted {
		if i > 0 && p.Number == sorted[i-1].Number {
			return ObjectAttrs{}, m.opErr(op, name, fmt.Errorf("part %d given twice", p.Number))
		}
		if p.Number < 1 || p.Number > MaxParts || p.ETag == "" {
			return ObjectAttrs{}, m.opErr(op, name, fmt.Errorf("invalid part %d (ETag %q)", p.Number, p.ETag))
		}
		doc.Parts = append(doc.Parts, xmlPart{p.Number, p.ETag})
	}
	body, err := xml.Marshal(doc)
	if err != nil {
		return ObjectAttrs{}, m.opErr(op, name, err)
	}
	req, err := m.newRequest(ctx, http.MethodPost, name, "uploadId="+uriEncode(uploadID, false), body)
	if err != nil {
		return ObjectAttrs{}, m.opErr(op, name, err)
	}
	req.Header.Set("Content-Type", "application/xml")

	resp, err := m.send(op, name, req)
	if err != nil {
		return ObjectAttrs{}, err
	}
	// A 200 may still carry an <Error>: S3 answers at once and keeps the
	// connection alive with spaces while it assembles the object, so a
	// failure can only show in the body.
	data, err := readLimited(resp.Body, maxResultBody)
	if err != nil {
		return ObjectAttrs{}, m.opErr(op, name, fmt.Errorf("reading the response: %w", err))
	}
	switch rootElement(data) {
	case "CompleteMultipartUploadResult":
	case "Error":
		return ObjectAttrs{}, m.opErr(op, name, classifyXMLError(op, resp.StatusCode, data))
	default:
		return ObjectAttrs{}, m.opErr(op, name, fmt.Errorf("HTTP %d with an unexpected body %q", resp.StatusCode, snippet(data)))
	}
	attrs := ObjectAttrs{Name: name}
	if g, err := strconv.ParseInt(resp.Header.Get("X-Goog-Generation"), 10, 64); err == nil {
		attrs.Generation = g
	}
	return attrs, nil
}

// Abort cancels the upload and frees its parts. A part upload running at the
// same time may still leave a part behind; abort again after it ends. An
// upload that was completed or aborted already gives ErrNotExist.
func (m *Multipart) Abort(ctx context.Context, name, uploadID string) error {
	const op = "abort"
	if uploadID == "" {
		return m.opErr(op, name, errors.New("empty upload ID"))
	}
	req, err := m.newRequest(ctx, http.MethodDelete, name, "uploadId="+uriEncode(uploadID, false), nil)
	if err != nil {
		return m.opErr(op, name, err)
	}
	resp, err := m.send(op, name, req)
	if err != nil {
		return err
	}
	drain(resp.Body)
	return nil
}

// PendingUpload is a multipart upload that was initiated and neither
// completed nor aborted.
type PendingUpload struct {
	Name      string
	UploadID  string
	Initiated time.Time // zero if the server's time could not be read
}

// ListUploads returns every pending upload whose object name starts with
// prefix, following the pages of the listing. There may be several uploads
// of one name.
func (m *Multipart) ListUploads(ctx context.Context, prefix string) ([]PendingUpload, error) {
	const op = "list-uploads"
	var out []PendingUpload
	keyMarker, idMarker := "", ""
	for {
		q := "uploads&prefix=" + uriEncode(prefix, false)
		if keyMarker != "" || idMarker != "" {
			q += "&key-marker=" + uriEncode(keyMarker, false) + "&upload-id-marker=" + uriEncode(idMarker, false)
		}
		req, err := m.newBucketRequest(ctx, http.MethodGet, "", q, nil)
		if err != nil {
			return nil, m.opErr(op, prefix, err)
		}
		var page struct {
			XMLName            xml.Name `xml:"ListMultipartUploadsResult"`
			IsTruncated        bool
			NextKeyMarker      string
			NextUploadIdMarker string
			Uploads            []struct {
				Key       string
				UploadID  string `xml:"UploadId"`
				Initiated string
			} `xml:"Upload"`
		}
		if err := m.doXML(op, prefix, req, &page); err != nil {
			return nil, err
		}
		for _, u := range page.Uploads {
			t, _ := time.Parse(time.RFC3339Nano, u.Initiated)
			out = append(out, PendingUpload{Name: u.Key, UploadID: u.UploadID, Initiated: t})
		}
		if !page.IsTruncated {
			return out, nil
		}
		if page.NextKeyMarker == keyMarker && page.NextUploadIdMarker == idMarker {
			return nil, m.opErr(op, prefix, errors.New("truncated listing without a new marker"))
		}
		keyMarker, idMarker = page.NextKeyMarker, page.NextUploadIdMarker
	}
}

// newRequest makes a request for object name with the raw (already
// escaped) query q and, if body is not nil, that body. An empty name is
// refused: the request would address the bucket itself.
func (m *Multipart) newRequest(ctx context.Context, method, name, q string, body []byte) (*http.Request, error) {
	if name == "" {
		return nil, errors.New("empty object name")
	}
	return m.newBucketRequest(ctx, method, "/"+name, q, body)
}

// newBucketRequest makes a request for sub ("" for the bucket itself, or
// "/" and an object name) under the bucket.
func (m *Multipart) newBucketRequest(ctx context.Context, method, sub, q string, body []byte) (*http.Request, error) {
	u := *m.base
	// Every byte of the name but unreserved ones and '/' is escaped: "a
	// b+c?#%" must reach the server as one object name.
	u.Path = m.base.Path + "/" + m.bucket + sub
	u.RawPath = m.base.EscapedPath() + "/" + uriEncode(m.bucket, false) + uriEncode(sub, true)
	u.RawQuery = q
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body) // NewRequest sets GetBody for it
	}
	return http.NewRequestWithContext(ctx, method, u.String(), r)
}

// send sends req and returns the response if its status is 2xx; the caller
// reads and closes its body. Otherwise it reads and closes the body and
// returns the classified error.
func (m *Multipart) send(op, name string, req *http.Request) (*http.Response, error) {
	resp, err := m.client.Do(req)
	if err != nil {
		if r := tokenRefusal(err); r != nil {
			err = noToken(r)
		}
		return nil, m.opErr(op, name, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	data, _ := readLimited(resp.Body, maxErrorBody)
	return nil, m.opErr(op, name, classifyXMLError(op, resp.StatusCode, data))
}

// doXML sends req and decodes a 2xx body into v, whose XMLName names the
// root element. On the calls that may come first ("initiate",
// "list-uploads"), a body that is not that XML means the API is missing.
func (m *Multipart) doXML(op, name string, req *http.Request, v any) error {
	resp, err := m.send(op, name, req)
	if err != nil {
		return err
	}
	data, err := readLimited(resp.Body, maxResultBody)
	if err != nil {
		return m.opErr(op, name, fmt.Errorf("reading the response: %w", err))
	}
	if err := xml.Unmarshal(data, v); err != nil {
		if rootElement(data) == "Error" {
			return m.opErr(op, name, classifyXMLError(op, resp.StatusCode, data))
		}
		return m.opErr(op, name, fmt.Errorf("%w: HTTP %d with an unexpected body %q", ErrMultipartUnsupported, resp.StatusCode, snippet(data)))
	}
	return nil
}

func (m *Multipart) opErr(op, name string, err error) error {
	return &OpError{Op: op, Bucket: m.bucket, Object: name, Err: err}
}

// classifyXMLError turns an error answer (status and body) into an error
// wrapping the sentinel that fits, with the server's code and message.
func classifyXMLError(op string, status int, body []byte) error {
	var e struct {
		XMLName xml.Name `xml:"Error"`
		Code    string
		Message string
		Details string // GCS
	}
	code := ""
	detail := fmt.Sprintf("HTTP %d", status)
	if xml.Unmarshal(body, &e) == nil && e.Code != "" {
		code = e.Code
		detail += " " + code
		if msg := strings.TrimSpace(e.Message + " " + e.Details); msg != "" {
			detail += ": " + msg
		}
	} else if s := snippet(body); s != "" {
		detail += ": " + s // not an S3 error body: a proxy's or an emulator's
	}
	var kind error
	switch {
	case status == http.StatusUnauthorized:
		kind = ErrUnauthenticated
	case status == http.StatusForbidden:
		kind = ErrPermission
	case code == "NoSuchBucket":
		kind = ErrBucketNotExist
	case code == "NoSuchUpload":
		kind = ErrNotExist
	case code == "BadDigest" || code == "InvalidDigest":
		// The body's checksum is not the one sent with it.
		kind = ErrChecksum
	case status == http.StatusPreconditionFailed:
		kind = ErrPrecondition
	case status == http.StatusMethodNotAllowed, status == http.StatusNotImplemented:
		kind = ErrMultipartUnsupported
	case (status == http.StatusNotFound || status == http.StatusBadRequest) && code == "" && (op == "initiate" || op == "list-uploads"):
		// A server with the API says which bucket or upload is missing,
		// or what is wrong, in an S3 error body; fake-gcs-server answers
		// an initiate with 400 and a JSON body ("invalid uploadType").
		kind = ErrMultipartUnsupported
	}
	if kind == nil {
		return errors.New(detail)
	}
	return fmt.Errorf("%w: %s", kind, detail)
}

// rootElement returns the local name of the first element of an XML
// document, or "" if there is none.
func rootElement(data []byte) string {
	d := xml.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := d.Token()
		if err != nil {
			return ""
		}
		if se, ok := tok.(xml.StartElement); ok {
			return se.Name.Local
		}
	}
}

// snippet is the start of a body, for error messages.
func snippet(body []byte) string {
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// readLimited reads at most limit bytes of rc, then drains and closes it.
func readLimited(rc io.ReadCloser, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(rc, limit))
	drain(rc)
	return data, err
}

// drain reads what is left of a response body (up to a bound, so that the
// connection can be reused) and closes it.
func drain(rc io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(rc, maxErrorBody))
	rc.Close()
}

// errPartFenced is what a part body returns when the transport reads it
// after UploadPart has returned; that request was abandoned already.
var errPartFenced = errors.New("part body read after its upload returned")

// partFence guards the caller's reader of one UploadPart call.
type partFence struct {
	mu     sync.Mutex
	closed bool // guarded by mu; once set, no body reads the caller's reader
}

func (f *partFence) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
}

// partBody is one request body of a part. Its reads hold the fence's lock,
// which only UploadPart's return contends for: that is what makes the
// return wait for a read of the caller's reader in flight.
type partBody struct {
	f     *partFence
	r     *io.SectionReader
	watch *stallWatch // marks the progress of the stream (stall.go)
}

func (b *partBody) Read(p []byte) (int, error) {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	if b.f.closed {
		return 0, errPartFenced
	}
	b.watch.progress()
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.watch.paused.Store(true) // all sent: what follows is the server's work
	}
	return n, err
}

func (b *partBody) Close() error { return nil }
