// Package statusfront puts, in front of an emulator, the answers that one
// other GCS emulator gives a resumable upload whose last request its
// precondition refused: the refusal (412) is lost on its way (a 503
// instead, as from a front end that dropped it), and the session's status
// query ("Content-Range: bytes */SIZE") is answered 200 with an object
// that does not exist. Tests use it to check that an upload said to be
// complete by anything but the answer to its last request is checked
// against the bucket (issue 33, item 4).
package statusfront

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// FalseGeneration is the generation of the object the front's status
// answers name, which no object has.
const FalseGeneration = 999999999

// Front is a running front; URL is its endpoint (give it to the client
// in place of the emulator's).
type Front struct {
	URL     string
	Queries atomic.Int64 // status queries answered with the false object
	Lost    atomic.Int64 // refusals of a session's last request replaced by a 503
}

// Start serves a front for the emulator at target (its URL) until the
// test ends. Before the first request that sends a session's bytes is
// passed on, meanwhile runs (a test replaces the object there, so that
// the emulator refuses the upload's last request); nil: nothing.
func Start(t testing.TB, target string, meanwhile func()) *Front {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("statusfront: %v", err)
	}
	f := &Front{}
	proxy := httputil.NewSingleHostReverseProxy(u) // keeps the front's Host: session URIs point at the front
	var first atomic.Bool
	var opened atomic.Pointer[string] // the object of the last session opened
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.Method == http.MethodPost && q.Get("uploadType") == "resumable" && !q.Has("upload_id") {
			name := q.Get("name")
			opened.Store(&name)
		}
		if r.Method != http.MethodPut || !q.Has("upload_id") {
			proxy.ServeHTTP(w, r)
			return
		}
		cr := r.Header.Get("Content-Range")
		if strings.HasPrefix(cr, "bytes */") {
			f.Queries.Add(1)
			w.Header().Set("Content-Type", "application/json; charset=UTF-8")
			name := ""
			if p := opened.Load(); p != nil {
				name = *p
			}
			fmt.Fprintf(w, `{"kind":"storage#object","name":%q,"generation":"%d","metageneration":"1","size":%q}`,
				name, FalseGeneration, strings.TrimPrefix(cr, "bytes */"))
			return
		}
		if meanwhile != nil && first.CompareAndSwap(false, true) {
			meanwhile()
		}
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r)
		if rec.Code == http.StatusPreconditionFailed {
			f.Lost.Add(1)
			http.Error(w, `{"error":{"code":503,"message":"statusfront: the answer was lost"}}`, http.StatusServiceUnavailable)
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}
