package emulator

import (
	"net/http"
	"strings"
)

// TokenChecker says whether a bearer token is good: issued, not expired,
// not revoked. internal/metadataserver.Server is one.
type TokenChecker interface {
	Valid(token string) bool
}

// authMiddleware, with Options.Tokens, answers a request whose
// Authorization is not "Bearer <token>" with a valid token as GCS does:
// 401, reason "required" for no credentials and "authError" ("Invalid
// Credentials") for a token it does not accept. A valid token without
// permission is GCS's 403; Fault(bucket, 403) plays that. Paths outside
// the API (/_internal/) are not checked.
func (s *Server) authMiddleware(next http.Handler) http.Handler {
	if s.tokens == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/_internal/") {
			next.ServeHTTP(w, r)
			return
		}
		scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		switch {
		case tok == "" || !strings.EqualFold(scheme, "Bearer"):
			s.unauthorized.Add(1)
			writeAuthError(w, "required", "Anonymous caller does not have storage access to the Google Cloud Storage bucket.")
		case !s.tokens.Valid(tok):
			s.unauthorized.Add(1)
			writeAuthError(w, "authError", "Invalid Credentials")
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// writeAuthError answers 401 with GCS's JSON error body and the
// WWW-Authenticate header it sends.
func writeAuthError(w http.ResponseWriter, reason, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="https://accounts.google.com/"`)
	writeErrorReason(w, http.StatusUnauthorized, reason, msg)
}

// Unauthorized is how many requests were answered 401 by the token check
// (Options.Tokens) since the last ResetCounters.
func (s *Server) Unauthorized() int64 { return s.unauthorized.Load() }
