package transfer

// Resumable uploads, resumed where the store says it holds bytes to.
//
// A single-request upload that breaks at 90% starts over: on a link that
// drops now and then, a large file may never get through. A resumable
// upload session (GCS JSON API, uploadType=resumable) keeps what arrived;
// after a broken connection, a stall or a 5xx, the client asks the session
// how far it got ("Content-Range: bytes */SIZE") and sends the rest from
// there. The bytes come from the cache file (an io.ReaderAt), so nothing
// is buffered in memory and the rest goes in one request: the cost over a
// single request is the request that opens the session (one round trip;
// docs/bench.md). The library's own resumable writer would buffer a chunk
// per upload (16 MiB by default) and wait for an answer after each.
//
// The session is GCS's, not the caller's: its conditions (ifGenerationMatch)
// and the declared CRC32C are checked when the last byte lands, so a
// resumed upload is exactly as guarded as a single request.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/api/googleapi"
	rawstorage "google.golang.org/api/storage/v1"
)

// DefaultResumableThreshold is the size from which GCS.Put sends a body
// it can read again (an io.ReaderAt with a size) as a resumable upload.
// Opening the session costs one round trip (30 ms on the bench's WAN
// profile): 8 MiB take about 0.3 s at 25 MiB/s, so the session adds
// about a tenth to the smallest such upload and less to larger ones,
// while a break late in it saves most of the transfer. gsutil's
// resumable threshold is 8 MiB too.
const DefaultResumableThreshold = 8 << 20

// errSessionGone: the store no longer knows the upload session (it
// expired, or failed for good). Transient: a new session sends the
// object again from its start.
var errSessionGone = errors.New("the upload session is gone")

// defaultResumeWait is the first wait before a session is asked how far
// it got; each further one waits twice as long, up to 5 s.
const defaultResumeWait = 250 * time.Millisecond

// maxIdleResumes bounds the resumes in a row that found the session no
// further along: a store that keeps taking nothing is down, not slow.
// A resume that made progress starts the count again.
const maxIdleResumes = 5

// sizedReaderAt is a body GCS.Put can read again from any offset: an
// *io.SectionReader of a file.
type sizedReaderAt interface {
	io.ReaderAt
	Size() int64
}

// resumable reports whether Put sends r as a resumable session (po.Resumable,
// or a body of at least the threshold), and then r as a sizedReaderAt.
func (g *GCS) resumable(r io.Reader, po PutOptions) (sizedReaderAt, bool) {
	ra, ok := r.(sizedReaderAt)
	if !ok {
		return nil, false
	}
	return ra, po.Resumable || (g.resumableAt > 0 && ra.Size() >= g.resumableAt)
}

// session is one resumable upload of an object.
type session struct {
	g    *GCS
	name string
	uri  string // the session URI the store gave
	r    sizedReaderAt
	size int64
	po   PutOptions
}

// putResumable uploads r as name in one resumable session, resuming it
// after transient failures (see the top of this file).
func (g *GCS) putResumable(ctx context.Context, name string, r sizedReaderAt, po PutOptions) (ObjectAttrs, error) {
	s := &session{g: g, name: name, r: r, size: r.Size(), po: po}
	if s.po.ContentType == "" {
		// What a single request gets: the client sniffs the first bytes.
		ct, err := sniffContentType(r, s.size)
		if err != nil {
			return ObjectAttrs{}, &OpError{Op: "put", Bucket: g.name, Object: name, Err: err}
		}
		s.po.ContentType = ct
	}
	if err := s.open(ctx); err != nil {
		return ObjectAttrs{}, err
	}
	var held int64
	wait := g.resumeWait
	reopened := false
	resumed := false // the session was asked how far it got: its answers are checked (madeAsSent)
	for idle := 0; ; {
		a, got, done, err := s.send(ctx, held)
		if done && err == nil && resumed {
			a, err = s.madeAsSent(ctx, a)
		}
		if done && errors.Is(err, errSessionGone) && !reopened {
			// Once: a session the store dropped is opened again and
			// the object sent from its start.
			reopened, held, resumed = true, 0, false
			if err = s.open(ctx); err != nil {
				return ObjectAttrs{}, err
			}
			continue
		}
		if done {
			return a, err
		}
		if err == nil && got > held { // the store took part of it (308): go on from there
			held, idle = got, 0
			continue
		}
		if err == nil {
			// A 308 that holds no more than before: as a failure, so
			// that a store that keeps answering so is not asked forever.
			err = &OpError{Op: "put", Bucket: g.name, Object: name, Err: fmt.Errorf("the upload session holds %d of %d bytes and took none of the rest", got, s.size)}
			held = got
		}
		if !mayResume(ctx, err) || idle >= maxIdleResumes {
			return ObjectAttrs{}, err
		}
		if !sleepCtx(ctx, wait) {
			return ObjectAttrs{}, err
		}
		wait = min(wait*2, 5*time.Second)
		resumed = true
		a, got, done, qerr := s.query(ctx)
		if done && qerr == nil {
			a, qerr = s.madeAsSent(ctx, a)
		}
		if done && !errors.Is(qerr, errSessionGone) {
			return a, qerr
		}
		if done { // gone: the send above finds that out and opens a new one
			got = held
			qerr = nil
		}
		if qerr != nil {
			if !mayResume(ctx, qerr) {
				return ObjectAttrs{}, qerr
			}
			idle++
			continue
		}
		if got > held {
			idle = 0
		} else {
			idle++
		}
		held = got
	}
}

// madeAsSent checks a, the object a session reported made after it was
// asked how far it got, against the bucket. Such an answer is not the
// answer to the request that sent the last byte, and a store may give
// one that is not true: one GCS emulator answers the status query of a
// session whose last request its precondition refused with 200 and an
// object that does not exist. What real GCS answers there is not known.
// The live object must be a's generation, with the size, the declared
// CRC32C and the custom metadata (the caller's upload ID among it) that
// the session sent; then madeAsSent returns it. Otherwise the upload did
// not make the object: ErrPrecondition for a conditional upload whose
// object is another version now, or gone while the upload was based on
// one (the caller's conflict path); errSessionGone (the object is sent
// again, in a new session) for a new object that is not there, or an
// unconditional upload.
func (s *session) madeAsSent(ctx context.Context, a ObjectAttrs) (ObjectAttrs, error) {
	live, err := s.g.Stat(ctx, s.name)
	if err == nil && live.Generation == a.Generation && live.Size == s.size &&
		(!s.po.SendCRC32C || live.CRC32C == s.po.CRC32C) && sameMetadata(live.Metadata, s.po.Metadata) {
		return live, nil
	}
	if err != nil && !errors.Is(err, ErrNotExist) {
		return ObjectAttrs{}, err // not known yet: transient errors are tried again by the caller
	}
	what := fmt.Sprintf("the upload session reported generation %d made, the bucket holds generation %d (%d bytes, CRC32C %08x)", a.Generation, live.Generation, live.Size, live.CRC32C)
	if err != nil {
		what = fmt.Sprintf("the upload session reported generation %d made, the bucket holds no such object", a.Generation)
	}
	if s.po.Unconditional || (err != nil && s.po.IfGenerationMatch == 0) {
		return ObjectAttrs{}, &OpError{Op: "put", Bucket: s.g.name, Object: s.name, Err: fmt.Errorf("%w: %s", errSessionGone, what)}
	}
	return ObjectAttrs{}, &OpError{Op: "put", Bucket: s.g.name, Object: s.name, Err: fmt.Errorf("%w: %s", ErrPrecondition, what)}
}

// sameMetadata reports whether the custom metadata of an object is the
// one an upload sent (nil and empty are the same).
func sameMetadata(got, sent map[string]string) bool {
	return len(got) == len(sent) && (len(sent) == 0 || maps.Equal(got, sent))
}

// mayResume reports whether an upload that failed with err may go on.
func mayResume(ctx context.Context, err error) bool {
	return ctx.Err() == nil && retryable(err)
}

// open starts the session.
func (s *session) open(ctx context.Context) error {
	g, po := s.g, s.po
	obj := &rawstorage.Object{Name: s.name, ContentType: po.ContentType, ContentEncoding: po.ContentEncoding, Metadata: po.Metadata}
	if po.SendCRC32C {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], po.CRC32C)
		obj.Crc32c = base64.StdEncoding.EncodeToString(b[:])
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return &OpError{Op: "put", Bucket: g.name, Object: s.name, Err: err}
	}
	q := url.Values{"uploadType": {"resumable"}, "name": {s.name}}
	if !po.Unconditional {
		q.Set("ifGenerationMatch", strconv.FormatInt(po.IfGenerationMatch, 10))
	}
	u := g.uploadURL + "b/" + url.PathEscape(g.name) + "/o?" + q.Encode()
	var uri string
	// Opening twice is harmless (an unused session expires): retried
	// like an idempotent call.
	err = g.retryIdempotent(ctx, func() error {
		// A small request: an answer that does not come within the
		// stall timeout is a stall, as a body that stops would be.
		rctx, watch := watchStalls(ctx, g.stall)
		defer watch.stop()
		req, err := http.NewRequestWithContext(rctx, http.MethodPost, u, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json; charset=UTF-8")
		req.Header.Set("X-Upload-Content-Type", po.ContentType)
		req.Header.Set("X-Upload-Content-Length", strconv.FormatInt(s.size, 10))
		resp, err := g.http.Do(req)
		if watch.stop() && ctx.Err() == nil {
			noteStall(ctx, "upload")
			return fmt.Errorf("no answer to the start of an upload session for %v: %w", g.stall, ErrStalled)
		}
		if err != nil {
			return err
		}
		defer drain(resp.Body)
		if err := googleapi.CheckResponse(resp); err != nil {
			return err
		}
		if uri = resp.Header.Get("Location"); uri == "" {
			return fmt.Errorf("the store opened no upload session (no Location in its answer)")
		}
		return nil
	})
	if err != nil {
		return g.wrapPut(s.name, err)
	}
	s.uri = uri
	return nil
}

// send sends the bytes from off to the end. done reports that the
// session is over: the object is made (a), or the store refused it for
// good (err). Otherwise the store holds got bytes (err nil), or the
// request failed with err.
func (s *session) send(ctx context.Context, off int64) (a ObjectAttrs, got int64, done bool, err error) {
	rctx, watch := watchStalls(ctx, s.g.stall)
	body := stallReader{io.NewSectionReader(s.r, off, s.size-off), watch}
	req, err := http.NewRequestWithContext(rctx, http.MethodPut, s.uri, body)
	if err != nil {
		watch.stop()
		return ObjectAttrs{}, 0, true, err
	}
	req.ContentLength = s.size - off
	if off == s.size {
		req.Body = http.NoBody
		watch.paused.Store(true) // nothing to send: the store's answer is awaited
		req.Header.Set("Content-Range", fmt.Sprintf("bytes */%d", s.size))
	} else {
		req.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, s.size-1, s.size))
	}
	resp, err := s.g.http.Do(req)
	a, got, done, err = s.answer(ctx, resp, err)
	if watch.stop() && ctx.Err() == nil {
		noteStall(ctx, "upload")
		return ObjectAttrs{}, 0, false, fmt.Errorf("put gs://%s/%s at offset %d: the server took no more of the body for %v: %w", s.g.name, s.name, off, s.g.stall, ErrStalled)
	}
	return a, got, done, err
}

// query asks the session how far it got; its results are send's.
func (s *session) query(ctx context.Context) (a ObjectAttrs, got int64, done bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.uri, http.NoBody)
	if err != nil {
		return ObjectAttrs{}, 0, true, err
	}
	req.Header.Set("Content-Range", fmt.Sprintf("bytes */%d", s.size))
	resp, err := s.g.http.Do(req)
	return s.answer(ctx, resp, err)
}

// answer reads the answer to a request of the session.
func (s *session) answer(ctx context.Context, resp *http.Response, err error) (ObjectAttrs, int64, bool, error) {
	if err != nil {
		return ObjectAttrs{}, 0, false, s.g.wrapPut(s.name, err)
	}
	defer drain(resp.Body)
	switch {
	case resp.StatusCode == http.StatusPermanentRedirect || resp.Header.Get("X-Http-Status-Code-Override") == "308":
		got, err := heldBytes(resp.Header.Get("Range"))
		if err == nil && got > s.size {
			err = fmt.Errorf("the upload session holds %d bytes of %d", got, s.size)
		}
		if err != nil {
			return ObjectAttrs{}, 0, true, &OpError{Op: "put", Bucket: s.g.name, Object: s.name, Err: err}
		}
		return ObjectAttrs{}, got, false, nil
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated:
		var o rawstorage.Object
		if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
			return ObjectAttrs{}, 0, false, s.g.wrapPut(s.name, fmt.Errorf("reading the upload's answer: %w", err))
		}
		a, err := fromRaw(&o)
		if err != nil {
			return ObjectAttrs{}, 0, true, s.g.wrapPut(s.name, err)
		}
		return a, 0, true, nil
	}
	err = s.g.wrapPut(s.name, googleapi.CheckResponse(resp))
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		// The session is gone (expired, or failed for good): not the
		// object's or the bucket's 404.
		return ObjectAttrs{}, 0, true, &OpError{Op: "put", Bucket: s.g.name, Object: s.name,
			Err: fmt.Errorf("%w: HTTP %d", errSessionGone, resp.StatusCode)}
	case resp.StatusCode == http.StatusBadRequest && s.po.SendCRC32C:
		if sum, serr := crc32cSection(ctx, s.r, 0, s.size); serr == nil && sum != s.po.CRC32C {
			// The file changed after its sum was taken: the store
			// refused bytes that are not the ones declared.
			err = fmt.Errorf("%w: the body sent has CRC32C %08x now, the upload declared %08x: %v", ErrChecksum, sum, s.po.CRC32C, err)
		}
		return ObjectAttrs{}, 0, true, err
	case !retryable(err) || resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusRequestTimeout:
		return ObjectAttrs{}, 0, true, err
	}
	return ObjectAttrs{}, 0, false, err
}

// heldBytes reads a session's "Range: bytes=0-N" (none: no bytes).
func heldBytes(h string) (int64, error) {
	if h == "" {
		return 0, nil
	}
	last, ok := strings.CutPrefix(h, "bytes=0-")
	n, err := strconv.ParseInt(last, 10, 64)
	if !ok || err != nil || n < 0 {
		return 0, fmt.Errorf("unreadable Range %q in the upload session's answer", h)
	}
	return n + 1, nil
}

// ObjectFromJSON reads an object resource of the JSON API, as a bucket's
// notification (payload format JSON_API_V1) carries it.
func ObjectFromJSON(data []byte) (ObjectAttrs, error) {
	var o rawstorage.Object
	if err := json.Unmarshal(data, &o); err != nil {
		return ObjectAttrs{}, err
	}
	return fromRaw(&o)
}

// fromRaw converts the JSON API's object resource.
func fromRaw(o *rawstorage.Object) (ObjectAttrs, error) {
	a := ObjectAttrs{Name: o.Name, Size: int64(o.Size), Generation: o.Generation, Metageneration: o.Metageneration,
		ContentType: o.ContentType, ContentEncoding: o.ContentEncoding, Metadata: o.Metadata}
	if o.Updated != "" {
		t, err := time.Parse(time.RFC3339Nano, o.Updated)
		if err != nil {
			return a, fmt.Errorf("the object's update time %q: %w", o.Updated, err)
		}
		a.Updated = t
	}
	if o.Crc32c != "" {
		b, err := base64.StdEncoding.DecodeString(o.Crc32c)
		if err != nil || len(b) != 4 {
			return a, fmt.Errorf("the object's crc32c %q is not 4 bytes of base64", o.Crc32c)
		}
		a.CRC32C = binary.BigEndian.Uint32(b)
	}
	if o.Md5Hash != "" {
		b, err := base64.StdEncoding.DecodeString(o.Md5Hash)
		if err != nil {
			return a, fmt.Errorf("the object's md5Hash %q is not base64", o.Md5Hash)
		}
		a.MD5 = b
	}
	return a, nil
}

// sleepCtx waits d, or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// retryIdempotent runs f, again after transient failures, as the storage
// client retries its idempotent calls (bounded; the breaker's refusal is
// not retried).
func (g *GCS) retryIdempotent(ctx context.Context, f func() error) error {
	again := func(err error) bool { return shouldRetry(err) || errors.Is(err, ErrStalled) }
	return withBackoff(ctx, 100*time.Millisecond, 5*time.Second, again, f)
}
