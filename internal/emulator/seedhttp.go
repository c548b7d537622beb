package emulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// seedMiddleware serves the requests of a seeded bucket (one PutMany
// stored objects in) that the fake cannot answer fast or at all: listings
// (seedlist.go), and objects.get and media reads of seeded objects. Any
// other request naming a seeded object first promotes it to the fake
// (seeded.go), then goes on. Requests for buckets never seeded pass
// through untouched.
func (s *Server) seedMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := classify(r)
		if t.bucket == "" || !s.seededBucket(t.bucket) {
			// A copy from an unseeded bucket may still overwrite a
			// seeded object.
			if b, o, ok := rewriteDestination(r); ok && s.seededBucket(b) {
				if err := s.promote(b, o); err != nil {
					writeError(w, http.StatusInternalServerError, err.Error())
					return
				}
			}
			next.ServeHTTP(w, r)
			return
		}
		if s.serveSeeded(w, r, t.bucket) {
			return
		}
		if r.Method == http.MethodDelete && strings.TrimSuffix(r.URL.EscapedPath(), "/") == jsonPrefix+url.PathEscape(t.bucket) && s.SeededObjects(t.bucket) > 0 {
			writeError(w, http.StatusConflict, "The bucket you tried to delete is not empty.")
			return
		}
		if err := s.promoteTouched(r, t.bucket); err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		next.ServeHTTP(w, r)
	})
}

// seedRequest is what a request of a seeded bucket asks, as far as the
// seeded store answers it.
type seedRequest struct {
	list   bool   // objects.list (JSON API)
	object string // the object a read names ("" if none)
	media  bool   // a read of the object's bytes (or HEAD), not its metadata
}

// parseSeedRequest works out whether r is a read the seeded store may
// answer: objects.list, objects.get, or a media read in any of its three
// forms. Object names in JSON paths are escaped; a literal "/" after the
// name starts a verb (acl, compose, rewriteTo), which is not a read.
func (s *Server) parseSeedRequest(r *http.Request) (seedRequest, bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return seedRequest{}, false
	}
	p := r.URL.EscapedPath()
	for _, pre := range []string{jsonPrefix, downloadPrefix} {
		rest, ok := strings.CutPrefix(p, pre)
		if !ok {
			continue
		}
		_, call, _ := strings.Cut(rest, "/")
		if pre == jsonPrefix && r.Method == http.MethodGet && (call == "o" || call == "o/") {
			return seedRequest{list: true}, true
		}
		obj, ok := strings.CutPrefix(call, "o/")
		if !ok || obj == "" || strings.Contains(obj, "/") {
			return seedRequest{}, false
		}
		media := pre == downloadPrefix || r.Method == http.MethodHead || r.URL.Query().Get("alt") == "media"
		return seedRequest{object: unescape(obj), media: media}, true
	}
	for _, np := range nonBucketPrefixes {
		if strings.HasPrefix(p, np) {
			return seedRequest{}, false
		}
	}
	// The XML form, routed by the fake to its download handler only when
	// the Host is its public host.
	if t := classify(r); t.object != "" && r.Host == s.publicHost {
		return seedRequest{object: t.object, media: true}, true
	}
	return seedRequest{}, false
}

// serveSeeded answers r from the seeded store if it is a listing of
// bucket, or a read of a seeded object, and reports whether it did.
func (s *Server) serveSeeded(w http.ResponseWriter, r *http.Request, bucket string) bool {
	q, ok := s.parseSeedRequest(r)
	if !ok {
		return false
	}
	if q.list {
		s.listSeeded(w, r, bucket)
		return true
	}
	o := s.lookupSeed(bucket, q.object)
	if o == nil {
		return false
	}
	if g := r.URL.Query().Get("generation"); g != "" {
		if v, err := strconv.ParseInt(g, 10, 64); err != nil || (v > 0 && v != o.gen) {
			// Another generation, or a malformed one: the fake
			// answers (404 or 400), as for any name it does not hold.
			return false
		}
	}
	if q.media {
		serveSeedMedia(w, r, bucket, o)
		return true
	}
	if pr := r.URL.Query().Get("projection"); pr != "" && !strings.EqualFold(pr, "full") && !strings.EqualFold(pr, "noacl") {
		return false // the fake answers 400
	}
	w.Header().Set("Accept-Ranges", "bytes")
	writeFakeJSON(w, objectJSON(o.attrs(bucket), s.url))
	return true
}

// writeFakeJSON answers 200 with v as JSON, with the headers the fake's
// JSON answers have.
func writeFakeJSON(w http.ResponseWriter, v any) {
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// serveSeedMedia answers a media read (GET or HEAD) of o with the status,
// headers and bytes the fake's download handler gives an object uploaded
// there without content encoding or custom metadata: Range as the fake
// reads it (one range; a start past the end is 416; a malformed or
// backwards range is the whole object).
func serveSeedMedia(w http.ResponseWriter, r *http.Request, bucket string, o *seedObject) {
	a := o.attrs(bucket)
	size := int64(len(o.data))
	start, last, status := int64(0), size-1, http.StatusOK
	h := w.Header()
	rs, re, ok := parseRangeHeader(r.Header.Get("Range"), size)
	if ok && (rs >= size || re >= rs) {
		if rs >= size {
			body := fmt.Sprintf(`<?xml version='1.0' encoding='UTF-8'?><Error><Code>InvalidRange</Code>`+
				`<Message>The requested range cannot be satisfied.</Message><Details>%s</Details></Error>`, r.Header.Get("Range"))
			setSeedMediaHeaders(h, a, int64(len(body)))
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			h.Set("Content-Type", "application/xml; charset=UTF-8")
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			if r.Method == http.MethodGet {
				_, _ = io.WriteString(w, body)
			}
			return
		}
		start, last, status = max(rs, 0), min(re, size-1), http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, last, size))
	}
	setSeedMediaHeaders(h, a, last-start+1)
	if a.ContentType != "" {
		h.Set("Content-Type", a.ContentType)
	}
	h.Set("X-Goog-Stored-Content-Encoding", "identity")
	for _, p := range [][2]string{{"response-content-disposition", "Content-Disposition"}, {"response-content-type", "Content-Type"}} {
		if v := r.URL.Query().Get(p[0]); v != "" {
			h.Set(p[1], v)
		}
	}
	w.WriteHeader(status)
	if r.Method == http.MethodGet {
		_, _ = w.Write(o.data[start : last+1])
	}
}

// setSeedMediaHeaders sets the headers every media answer has.
func setSeedMediaHeaders(h http.Header, a fakestorage.ObjectAttrs, length int64) {
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Length", strconv.FormatInt(length, 10))
	h.Set("X-Goog-Generation", strconv.FormatInt(a.Generation, 10))
	h.Set("X-Goog-Hash", fmt.Sprintf("crc32c=%s,md5=%s", a.Crc32c, a.Md5Hash))
	h.Set("X-Goog-Stored-Content-Length", strconv.FormatInt(a.Size, 10))
	h.Set("Last-Modified", a.Updated.Format(http.TimeFormat))
	h.Set("ETag", strconv.Quote(a.Etag))
	h.Set("Access-Control-Allow-Origin", "*")
}

// parseRangeHeader reads "bytes=A-B", "bytes=A-" and "bytes=-N" (B and
// the suffix's start not clamped); ok is false for anything else.
func parseRangeHeader(v string, size int64) (start, end int64, ok bool) {
	spec, found := strings.CutPrefix(v, "bytes=")
	if !found || spec == "" {
		return 0, 0, false
	}
	if spec[0] == '-' {
		n, err := strconv.ParseInt(spec, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		return size + n, size - 1, true
	}
	a, b, found := strings.Cut(spec, "-")
	if !found {
		return 0, 0, false
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if b == "" {
		return start, size - 1, true
	}
	end, err = strconv.ParseInt(b, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return start, end, true
}

// apiObject is the JSON API's object resource, with the fields the fake
// sends, in its order.
type apiObject struct {
	Kind                    string            `json:"kind"`
	Name                    string            `json:"name"`
	ID                      string            `json:"id"`
	Bucket                  string            `json:"bucket"`
	Size                    int64             `json:"size,string"`
	ContentType             string            `json:"contentType,omitempty"`
	ContentEncoding         string            `json:"contentEncoding,omitempty"`
	ContentDisposition      string            `json:"contentDisposition,omitempty"`
	ContentLanguage         string            `json:"contentLanguage,omitempty"`
	CacheControl            string            `json:"cacheControl,omitempty"`
	Crc32c                  string            `json:"crc32c,omitempty"`
	ACL                     []apiObjectACL    `json:"acl,omitempty"`
	Md5Hash                 string            `json:"md5Hash,omitempty"`
	Etag                    string            `json:"etag,omitempty"`
	StorageClass            string            `json:"storageClass"`
	TimeCreated             string            `json:"timeCreated,omitempty"`
	TimeDeleted             string            `json:"timeDeleted,omitempty"`
	TimeStorageClassUpdated string            `json:"timeStorageClassUpdated,omitempty"`
	Updated                 string            `json:"updated,omitempty"`
	Generation              int64             `json:"generation,string"`
	CustomTime              string            `json:"customTime,omitempty"`
	Metadata                map[string]string `json:"metadata,omitempty"`
	SelfLink                string            `json:"selfLink,omitempty"`
	MediaLink               string            `json:"mediaLink,omitempty"`
	Metageneration          string            `json:"metageneration,omitempty"`
	Retention               *apiRetention     `json:"retention,omitempty"`
}

// apiObjectACL is one entry of an object's acl, as the fake lists it.
type apiObjectACL struct {
	Bucket string `json:"bucket,omitempty"`
	Entity string `json:"entity,omitempty"`
	Etag   string `json:"etag,omitempty"`
	Kind   string `json:"kind,omitempty"`
	Object string `json:"object,omitempty"`
	Role   string `json:"role,omitempty"`
}

// apiRetention is an object's retention, as the fake sends it.
type apiRetention struct {
	Mode            string `json:"mode,omitempty"`
	RetainUntilTime string `json:"retainUntilTime,omitempty"`
}

// apiTime formats t as the fake does ("" for the zero time).
func apiTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format("2006-01-02T15:04:05.999999Z07:00")
}

// objectJSON renders a as the fake renders an object in a listing (and,
// without ACL, in objects.get). Metadata is copied: the fake changes its
// maps in place on PATCH.
func objectJSON(a fakestorage.ObjectAttrs, externalURL string) apiObject {
	class := a.StorageClass
	if class == "" {
		class = "STANDARD"
	}
	o := apiObject{
		Kind: "storage#object", ID: a.BucketName + "/" + a.Name, Bucket: a.BucketName, Name: a.Name,
		Size: a.Size, ContentType: a.ContentType, ContentEncoding: a.ContentEncoding,
		ContentDisposition: a.ContentDisposition, ContentLanguage: a.ContentLanguage,
		CacheControl: a.CacheControl, Crc32c: a.Crc32c, Md5Hash: a.Md5Hash, Etag: a.Etag,
		StorageClass: class, TimeCreated: apiTime(a.Created), TimeDeleted: apiTime(a.Deleted),
		TimeStorageClassUpdated: apiTime(a.Updated), Updated: apiTime(a.Updated),
		CustomTime: apiTime(a.CustomTime), Generation: a.Generation,
		SelfLink:       fmt.Sprintf("%s/storage/v1/b/%s/o/%s", externalURL, url.PathEscape(a.BucketName), url.PathEscape(a.Name)),
		MediaLink:      fmt.Sprintf("%s/download/storage/v1/b/%s/o/%s?alt=media", externalURL, url.PathEscape(a.BucketName), url.PathEscape(a.Name)),
		Metageneration: "1",
	}
	if len(a.Metadata) > 0 {
		o.Metadata = make(map[string]string, len(a.Metadata))
		for k, v := range a.Metadata {
			o.Metadata[k] = v
		}
	}
	for _, rule := range a.ACL {
		o.ACL = append(o.ACL, apiObjectACL{Bucket: a.BucketName, Entity: string(rule.Entity), Object: a.Name,
			Role: string(rule.Role), Etag: "RVRhZw==", Kind: "storage#objectAccessControl"})
	}
	if a.Retention != nil {
		o.Retention = &apiRetention{Mode: a.Retention.Mode, RetainUntilTime: apiTime(a.Retention.RetainUntil)}
	}
	return o
}

// promoteTouched promotes, before the fake sees r, every seeded object r
// names: the object of a JSON or XML object path (and the destination of
// a copy or rewrite, in its own bucket), an upload's object, a compose's
// sources, and everything under a folder a folder call names.
func (s *Server) promoteTouched(r *http.Request, bucket string) error {
	p := r.URL.EscapedPath()
	var names []string
	if rest, ok := strings.CutPrefix(p, jsonPrefix); ok {
		_, call, _ := strings.Cut(rest, "/")
		if folders, ok := strings.CutPrefix(call, "folders"); ok {
			return s.promoteFolders(bucket, folders, r.URL.Query().Get("prefix"))
		}
		if obj, ok := strings.CutPrefix(call, "o/"); ok {
			obj, verb, _ := strings.Cut(obj, "/")
			names = append(names, unescape(obj))
			if verb == "compose" {
				names = append(names, composeSources(r)...)
			}
		}
		if b, o, ok := rewriteDestination(r); ok && s.seededBucket(b) {
			if err := s.promote(b, o); err != nil {
				return err
			}
		}
	} else {
		if t := classify(r); t.object != "" {
			names = append(names, t.object)
		}
		if name := s.madeObjectName(r); name != "" {
			names = append(names, name)
		}
	}
	for _, n := range names {
		if err := s.promote(bucket, n); err != nil {
			return err
		}
	}
	return nil
}

// promoteFolders promotes what a folder call (folders, folders/F...,
// with call the rest of the path after "folders") works on: everything
// under the folders it names, or under prefix for folders.list.
func (s *Server) promoteFolders(bucket, call, prefix string) error {
	call = strings.TrimPrefix(call, "/")
	if call == "" {
		return s.promotePrefix(bucket, prefix)
	}
	src, dst, _ := strings.Cut(call, "/renameTo/folders/")
	for _, f := range []string{src, dst} {
		if f == "" {
			continue
		}
		if err := s.promotePrefix(bucket, unescape(f)); err != nil {
			return err
		}
	}
	return nil
}

// composeSources reads the source names of an objects.compose request,
// putting its body back for the handlers after.
func composeSources(r *http.Request) []string {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxComposeBody))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	if err != nil {
		return nil
	}
	var req composeRequest
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	names := make([]string, 0, len(req.SourceObjects))
	for _, src := range req.SourceObjects {
		names = append(names, src.Name)
	}
	return names
}
