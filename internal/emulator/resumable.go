package emulator

// Resumable upload sessions, answered by the emulator itself, as GCS's
// JSON API documents them (cloud.google.com/storage/docs/performing-
// resumable-uploads): the fake appends every request's body to the
// session whatever its Content-Range says, and takes a status query
// ("bytes */TOTAL", no body) for the end of the upload, so a client
// that resumes after a broken connection would get a damaged object.
//
//   - POST .../upload/storage/v1/b/BUCKET/o?uploadType=resumable starts a
//     session: the JSON body is the object's metadata (name, contentType,
//     contentEncoding, metadata, crc32c, md5Hash), the query its
//     conditions. The answer's Location is the session URI.
//   - PUT (or POST) SESSION with "Content-Range: bytes FIRST-LAST/TOTAL" (TOTAL "*"
//     while unknown) sends bytes. FIRST must not be past what the session
//     holds; bytes before that are dropped (already there). The answer is
//     308 with "Range: bytes=0-N" (N the last byte held; no Range while
//     none is), or the object once TOTAL bytes are held.
//   - PUT SESSION with "Content-Range: bytes */TOTAL" (or "*/*") and no
//     body asks how far the session got: 308 as above, or, once it has
//     all TOTAL bytes, the object (the session is finished then).
//   - A body cut short (a broken connection) keeps the bytes that
//     arrived, rounded down to 256 KiB, as GCS may keep part of a
//     request: a client must resume where the session says, not where
//     it stopped sending.
//   - The object is made, with the session's conditions and declared
//     checksums, by handing the fake a single multipart upload of it
//     (the rest of the middleware chain sees that request), and its
//     answer is the answer to every later request of the session.
//
// A session lives until the emulator closes. Clients that set
// "X-GUploader-No-308" (the Go client) get 200 with
// "X-Http-Status-Code-Override: 308" instead of 308.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// sessionQuantum is the granularity of what a cut request keeps.
const sessionQuantum = 256 << 10

// session is one resumable upload.
type session struct {
	mu     sync.Mutex
	bucket string
	query  url.Values     // the initiation's conditions and options
	meta   map[string]any // the initiation's object resource
	ctype  string         // X-Upload-Content-Type
	data   []byte         // held so far
	total  int64          // -1 while unknown
	// Once finished: the fake's answer, given to every later request.
	done   bool
	status int
	header http.Header
	body   []byte
}

// sessions holds the emulator's resumable uploads.
type sessions struct {
	mu  sync.Mutex
	all map[string]*session
	cut func(r *http.Request) (SessionCut, bool)
}

// SessionCut is what happens to the body of a resumable upload's PUT
// (CutSessionBodies): after After bytes arrived, the connection breaks,
// or with Stall the emulator takes no more of it and holds the request
// until the client goes away (or the emulator closes). Either way the
// bytes that arrived are kept as a broken connection keeps them,
// rounded down to 256 KiB, and are in the session at once.
type SessionCut struct {
	After int64
	Stall bool
}

// CutSessionBodies makes the emulator cut the body of each resumable
// upload PUT for which f says ok (see SessionCut). nil removes it.
func (s *Server) CutSessionBodies(f func(r *http.Request) (SessionCut, bool)) {
	s.uploads.mu.Lock()
	defer s.uploads.mu.Unlock()
	s.uploads.cut = f
}

// resumableMiddleware answers resumable upload sessions (see above).
func (s *Server) resumableMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if !strings.HasPrefix(r.URL.Path, uploadPrefix) || q.Get("uploadType") != "resumable" {
			next.ServeHTTP(w, r)
			return
		}
		switch {
		case r.Method == http.MethodPost && !q.Has("upload_id"):
			s.startSession(w, r)
		case (r.Method == http.MethodPut || r.Method == http.MethodPost) && q.Has("upload_id"):
			// GCS documents PUT; the Go client sends POST.
			s.continueSession(w, r, next)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// startSession answers the request that starts a session.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request) {
	t := classify(r)
	if !s.bucketExists(t.bucket) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("bucket %q not found", t.bucket))
		return
	}
	meta := map[string]any{}
	if body, err := io.ReadAll(r.Body); err != nil {
		writeError(w, http.StatusBadRequest, "reading the session's metadata: "+err.Error())
		return
	} else if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &meta); err != nil {
			writeError(w, http.StatusBadRequest, "the session's metadata is not a JSON object: "+err.Error())
			return
		}
	}
	q := r.URL.Query()
	if name := q.Get("name"); name != "" {
		meta["name"] = name
	}
	if name, _ := meta["name"].(string); name == "" {
		writeError(w, http.StatusBadRequest, "no object name: give name= or the metadata's name")
		return
	}
	var id [12]byte
	_, _ = rand.Read(id[:])
	sid := hex.EncodeToString(id[:])
	q.Del("name")
	s.uploads.mu.Lock()
	if s.uploads.all == nil {
		s.uploads.all = map[string]*session{}
	}
	s.uploads.all[sid] = &session{bucket: t.bucket, query: q, meta: meta, ctype: r.Header.Get("X-Upload-Content-Type"), total: -1}
	s.uploads.mu.Unlock()
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	loc := url.URL{Scheme: scheme, Host: r.Host, Path: r.URL.Path, RawQuery: url.Values{"uploadType": {"resumable"}, "upload_id": {sid}}.Encode()}
	w.Header().Set("Location", loc.String())
	w.Header().Set("X-GUploader-UploadID", sid)
	w.WriteHeader(http.StatusOK)
}

// contentRange is a parsed "bytes FIRST-LAST/TOTAL" ("bytes */TOTAL":
// first < 0; TOTAL "*": total < 0).
type contentRange struct{ first, last, total int64 }

func parseRange(h string) (contentRange, error) {
	cr := contentRange{first: -1, last: -1, total: -1}
	spec, ok := strings.CutPrefix(h, "bytes ")
	rng, tot, ok2 := strings.Cut(spec, "/")
	if !ok || !ok2 {
		return cr, fmt.Errorf("invalid Content-Range %q", h)
	}
	var err error
	if tot != "*" {
		if cr.total, err = strconv.ParseInt(tot, 10, 64); err != nil || cr.total < 0 {
			return cr, fmt.Errorf("invalid Content-Range %q", h)
		}
	}
	if rng == "*" {
		return cr, nil
	}
	a, b, ok := strings.Cut(rng, "-")
	cr.first, err = strconv.ParseInt(a, 10, 64)
	if ok && err == nil {
		cr.last, err = strconv.ParseInt(b, 10, 64)
	}
	if !ok || err != nil || cr.first < 0 || cr.last < cr.first || (cr.total >= 0 && cr.last >= cr.total) {
		return cr, fmt.Errorf("invalid Content-Range %q", h)
	}
	return cr, nil
}

// continueSession answers a PUT of session bytes or a status query.
func (s *Server) continueSession(w http.ResponseWriter, r *http.Request, next http.Handler) {
	sid := r.URL.Query().Get("upload_id")
	s.uploads.mu.Lock()
	sess, cut := s.uploads.all[sid], s.uploads.cut
	s.uploads.mu.Unlock()
	if sess == nil {
		writeError(w, http.StatusNotFound, "no such upload session")
		return
	}
	cr := contentRange{first: -1, total: -1}
	if h := r.Header.Get("Content-Range"); h != "" {
		var err error
		if cr, err = parseRange(h); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	var body []byte
	var broken error
	var how *SessionCut
	if cr.first >= 0 {
		if cut != nil {
			if c, ok := cut(r); ok && c.After < cr.last-cr.first+1 {
				how = &c
			}
		}
		body, broken = readSessionBody(r, cr, how)
	}
	sess.mu.Lock()
	if sess.done {
		sess.answer(w)
		sess.mu.Unlock()
		return
	}
	err := sess.take(cr, body, broken != nil)
	if err == nil && broken == nil && sess.total >= 0 && int64(len(sess.data)) == sess.total {
		sess.finish(r, next)
	}
	switch {
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
	case broken != nil:
	case sess.done:
		sess.answer(w)
	default:
		sess.incomplete(w, r)
	}
	sess.mu.Unlock()
	if broken != nil {
		if how != nil && how.Stall {
			<-r.Context().Done() // the client gave up, or the emulator closes
		}
		panic(http.ErrAbortHandler) // the connection is broken: no answer
	}
}

// readSessionBody reads the body of a PUT of bytes cr: all of it, or with
// a cut (how not nil), its first how.After bytes, and then reports the
// connection broken.
func readSessionBody(r *http.Request, cr contentRange, how *SessionCut) ([]byte, error) {
	want := cr.last - cr.first + 1
	limit, cutHere := want, how != nil
	if cutHere {
		limit = how.After
	}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(r.Body, limit))
	switch {
	case err != nil:
		return buf.Bytes(), err
	case cutHere:
		return buf.Bytes(), fmt.Errorf("connection cut by the test after %d bytes", n)
	case n < want:
		return buf.Bytes(), io.ErrUnexpectedEOF
	}
	return buf.Bytes(), nil
}

// take adds body, the bytes cr names (all of them, or what arrived of
// them if broken), to the session. Called with sess.mu held.
func (sess *session) take(cr contentRange, body []byte, broken bool) error {
	if cr.total >= 0 {
		if sess.total >= 0 && sess.total != cr.total {
			return fmt.Errorf("the upload's size was %d, now %d", sess.total, cr.total)
		}
		sess.total = cr.total
	}
	if cr.first < 0 {
		return nil
	}
	held := int64(len(sess.data))
	if cr.first > held {
		return fmt.Errorf("bytes from %d sent, but the session holds only %d: resume from there", cr.first, held)
	}
	if broken {
		end := cr.first + int64(len(body))
		end -= end % sessionQuantum
		body = body[:max(0, end-cr.first)]
	}
	if skip := held - cr.first; skip < int64(len(body)) {
		sess.data = append(sess.data, body[skip:]...)
	}
	if sess.total >= 0 && int64(len(sess.data)) > sess.total {
		return fmt.Errorf("the session holds %d bytes, more than the %d declared", len(sess.data), sess.total)
	}
	return nil
}

// incomplete answers "resume incomplete": what the session holds.
// Called with sess.mu held.
func (sess *session) incomplete(w http.ResponseWriter, r *http.Request) {
	if n := len(sess.data); n > 0 {
		w.Header().Set("Range", fmt.Sprintf("bytes=0-%d", n-1))
	}
	if r.Header.Get("X-GUploader-No-308") != "" {
		w.Header().Set("X-Http-Status-Code-Override", "308")
		w.WriteHeader(http.StatusOK)
		return
	}
	w.WriteHeader(http.StatusPermanentRedirect)
}

// finish makes the object: one multipart upload of it, through next.
// Called with sess.mu held.
func (sess *session) finish(r *http.Request, next http.Handler) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	meta, _ := json.Marshal(sess.meta)
	h := textproto.MIMEHeader{}
	h.Set("Content-Type", "application/json; charset=UTF-8")
	p, _ := mw.CreatePart(h)
	_, _ = p.Write(meta)
	ctype, _ := sess.meta["contentType"].(string)
	if ctype == "" {
		ctype = sess.ctype
	}
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	h = textproto.MIMEHeader{}
	h.Set("Content-Type", ctype)
	p, _ = mw.CreatePart(h)
	_, _ = p.Write(sess.data)
	_ = mw.Close()

	q := url.Values{}
	for k, v := range sess.query {
		if k != "uploadType" && k != "upload_id" {
			q[k] = v
		}
	}
	q.Set("uploadType", "multipart")
	q.Set("name", sess.meta["name"].(string))
	req := httptest.NewRequestWithContext(r.Context(), http.MethodPost, "/upload/storage/v1/b/"+url.PathEscape(sess.bucket)+"/o?"+q.Encode(), &body)
	req.Host = r.Host
	req.Header.Set("Content-Type", "multipart/related; boundary="+mw.Boundary())
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, req)
	sess.done, sess.status, sess.header, sess.body = true, rec.Code, rec.Header().Clone(), rec.Body.Bytes()
	sess.data = nil
}

// answer gives the finished session's answer. Called with sess.mu held.
func (sess *session) answer(w http.ResponseWriter) {
	for k, v := range sess.header {
		w.Header()[k] = v
	}
	w.WriteHeader(sess.status)
	_, _ = w.Write(sess.body)
}
