package emulator

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// preconditionMiddleware enforces ifGenerationMatch on the calls where
// fake-gcs-server ignores it: compose (POST .../o/DST/compose), copies
// (POST .../o/SRC/rewriteTo/b/BUCKET/o/DST), delete (DELETE .../o/NAME)
// and metadata patches (PATCH .../o/NAME). It checks the live generation and answers 412 on a
// mismatch, as GCS does; "0" means the object must not exist. The check
// and the call it guards run under one mutex, so two guarded calls cannot
// interleave; an unguarded upload racing them can (GCS makes the check
// atomic; the emulator only needs to be right for tests that do not race).
func (s *Server) preconditionMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want := r.URL.Query().Get("ifGenerationMatch")
		if want == "" || !strings.HasPrefix(r.URL.EscapedPath(), jsonPrefix) {
			next.ServeHTTP(w, r)
			return
		}
		t := classify(r)
		name, compose := strings.CutSuffix(t.object, "/compose")
		guarded := (r.Method == http.MethodPost && compose) ||
			((r.Method == http.MethodDelete || r.Method == http.MethodPatch) && !compose)
		if b, n, ok := rewriteDestination(r); ok {
			// A copy (objects.rewrite): the condition is on the destination.
			t.bucket, name, guarded = b, n, true
		}
		if !guarded || t.bucket == "" || name == "" {
			next.ServeHTTP(w, r)
			return
		}
		gen, err := strconv.ParseInt(want, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid ifGenerationMatch %q", want))
			return
		}
		s.guardMu.Lock()
		defer s.guardMu.Unlock()
		cur, err := s.Generation(t.bucket, name)
		if err != nil {
			if r.Method != http.MethodPost {
				next.ServeHTTP(w, r) // the fake answers 404, as GCS does
				return
			}
			cur = 0 // missing
		}
		if cur != gen {
			writeError(w, http.StatusPreconditionFailed, fmt.Sprintf("At least one of the pre-conditions you specified did not hold (live generation %d, wanted %d)", cur, gen))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// rewriteDestination returns the destination bucket and object of an
// objects.rewrite or objects.copy request, read from the escaped path
// (object names there have their '/' escaped).
func rewriteDestination(r *http.Request) (bucket, object string, ok bool) {
	if r.Method != http.MethodPost {
		return "", "", false
	}
	p := strings.TrimPrefix(r.URL.EscapedPath(), jsonPrefix)
	for _, verb := range []string{"/rewriteTo/b/", "/copyTo/b/"} {
		if _, dst, found := strings.Cut(p, verb); found {
			b, o, found := strings.Cut(dst, "/o/")
			if !found {
				return "", "", false
			}
			return unescape(b), unescape(o), true
		}
	}
	return "", "", false
}
