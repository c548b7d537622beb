package emulator

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// target is what a request names, as far as the counters and faults care.
type target struct {
	bucket    string // "" if the request names no bucket
	object    string // decoded object name; "" if none
	mediaRead bool   // a GET that downloads object bytes
}

// Path prefixes of the JSON API that name a bucket right after them.
const (
	jsonPrefix     = "/storage/v1/b/"
	downloadPrefix = "/download/storage/v1/b/"
	uploadPrefix   = "/upload/storage/v1/b/"
)

// Path prefixes that never name a bucket (everything else outside the JSON
// API is read as the XML form /BUCKET/OBJECT).
var nonBucketPrefixes = []string{
	"/storage/",
	"/download/",
	"/upload/",
	"/batch/",
	"/_internal/",
}

// classify works out which bucket and object a request names, and whether
// it is a media read. It works on the escaped path, because object names in
// the JSON API carry "/" as "%2F".
func classify(r *http.Request) target {
	p := r.URL.EscapedPath()
	get := r.Method == http.MethodGet
	switch {
	case strings.HasPrefix(p, jsonPrefix):
		t := splitBucketObject(strings.TrimPrefix(p, jsonPrefix), "/o/")
		t.mediaRead = get && t.object != "" && r.URL.Query().Get("alt") == "media"
		return t
	case strings.HasPrefix(p, downloadPrefix):
		t := splitBucketObject(strings.TrimPrefix(p, downloadPrefix), "/o/")
		t.mediaRead = get && t.object != ""
		return t
	case strings.HasPrefix(p, uploadPrefix):
		t := splitBucketObject(strings.TrimPrefix(p, uploadPrefix), "/o/")
		t.object = "" // upload paths name the object in the query, if at all
		return t
	}
	for _, np := range nonBucketPrefixes {
		if strings.HasPrefix(p, np) {
			return target{}
		}
	}
	// XML API: /BUCKET or /BUCKET/OBJECT, the object name's "/" literal.
	t := splitBucketObject(strings.TrimPrefix(p, "/"), "/")
	t.mediaRead = get && t.object != ""
	return t
}

// splitBucketObject splits "BUCKET" + sep + "OBJECT" (both escaped) and
// decodes them. Without sep, all of rest up to the first "/" is the bucket.
func splitBucketObject(rest, sep string) target {
	var t target
	bucket, obj, found := strings.Cut(rest, sep)
	if !found {
		bucket, _, _ = strings.Cut(rest, "/")
	}
	t.bucket = unescape(bucket)
	if found {
		t.object = unescape(obj)
	}
	return t
}

// unescape decodes a path segment, leaving it as is if it is malformed.
func unescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// gcsError is the JSON error body GCS sends, as parsed by
// google.golang.org/api/googleapi.CheckResponse.
type gcsError struct {
	Error gcsErrorDetail `json:"error"`
}

// gcsErrorDetail is the "error" member of gcsError.
type gcsErrorDetail struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Errors  []gcsErrorItem `json:"errors"`
}

// gcsErrorItem is one entry of the "errors" list of gcsErrorDetail.
type gcsErrorItem struct {
	Domain  string `json:"domain"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// reasons maps HTTP statuses to the "reason" GCS gives for them.
var reasons = map[int]string{
	http.StatusBadRequest:          "invalid",
	http.StatusUnauthorized:        "required",
	http.StatusForbidden:           "forbidden",
	http.StatusNotFound:            "notFound",
	http.StatusConflict:            "conflict",
	http.StatusPreconditionFailed:  "conditionNotMet",
	http.StatusTooManyRequests:     "rateLimitExceeded",
	http.StatusInternalServerError: "backendError",
	http.StatusServiceUnavailable:  "backendError",
}

// writeError answers with status and a GCS-style JSON error body.
func writeError(w http.ResponseWriter, status int, msg string) {
	reason := reasons[status]
	if reason == "" {
		reason = "emulatorFault"
	}
	writeErrorReason(w, status, reason, msg)
}

// writeErrorReason answers with status and a GCS-style JSON error body
// giving reason.
func writeErrorReason(w http.ResponseWriter, status int, reason, msg string) {
	body, _ := json.Marshal(gcsError{Error: gcsErrorDetail{
		Code:    status,
		Message: msg,
		Errors:  []gcsErrorItem{{Domain: "global", Reason: reason, Message: msg}},
	}})
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
