// Package metadataserver is a stand-in for the metadata server of a
// Google Compute Engine VM, for tests: it hands out short-lived opaque
// access tokens, as a VM's service account gets them, and can be told to
// refuse them. Point a client at it with GCE_METADATA_HOST=host:port
// (Addr): cloud.google.com/go/compute/metadata then takes the process
// for a VM and golang.org/x/oauth2/google's default credentials ask it
// for tokens.
//
// It answers what those libraries ask, over plain HTTP under
// /computeMetadata/v1/:
//
//   - instance/service-accounts/default/token: {"access_token",
//     "expires_in", "token_type": "Bearer"}, a new token each time,
//     valid for Options.Lifetime (expires_in is that in whole seconds);
//   - instance/service-accounts/default/email and .../scopes;
//   - project/project-id, project/numeric-project-id;
//   - universe/universe-domain ("googleapis.com").
//
// As on a VM, a request without the header "Metadata-Flavor: Google" is
// answered 403, and every answer carries that header. Anything else is
// 404, as the real server answers an unknown key.
//
// The server is also the token authority a bucket stand-in asks: Valid
// says whether a token was handed out here, has not expired and was not
// revoked (internal/emulator takes it as Options.Tokens). A test makes
// the credentials go bad with Refuse (no new tokens, as on a VM without
// a service account) and Revoke (the tokens handed out so far are no
// longer accepted). It is a separate package from the emulator because
// it is a separate server on a VM: a client reaches the two at
// different addresses, and a test can use either alone.
package metadataserver

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure Start. Zero fields take the defaults.
type Options struct {
	// Lifetime is how long a token is valid, from when it is handed out.
	// It is rounded up to whole seconds, as expires_in is. Default 1h
	// (a VM's tokens last about that). Mind that golang.org/x/oauth2
	// takes a token as expired 10 s before its expiry: a client uses a
	// token of Lifetime L for L-10s at most.
	Lifetime time.Duration
	// ProjectID is the project the VM is in. Default "bucketfs-test".
	ProjectID string
	// Email is the service account's. Default
	// "vm@bucketfs-test.iam.gserviceaccount.com".
	Email string
	// Scopes the service account's tokens have. Default cloud-platform.
	Scopes []string
}

func (o *Options) defaults() {
	if o.Lifetime <= 0 {
		o.Lifetime = time.Hour
	}
	if o.Lifetime%time.Second != 0 {
		o.Lifetime = o.Lifetime.Truncate(time.Second) + time.Second
	}
	if o.ProjectID == "" {
		o.ProjectID = "bucketfs-test"
	}
	if o.Email == "" {
		o.Email = "vm@bucketfs-test.iam.gserviceaccount.com"
	}
	if len(o.Scopes) == 0 {
		o.Scopes = []string{"https://www.googleapis.com/auth/cloud-platform"}
	}
}

// Server is a running stand-in. All methods are safe for concurrent use.
type Server struct {
	o    Options
	l    net.Listener
	http *http.Server
	done chan struct{}

	asked atomic.Int64 // token requests, refused ones too

	mu     sync.Mutex
	refuse int                  // guarded by mu; status for token requests, 0: hand them out
	tokens map[string]time.Time // guarded by mu; token -> expiry (zero time: revoked)
}

// Start listens on a free loopback port and serves until Close.
func Start(o Options) (*Server, error) {
	o.defaults()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("metadataserver: listen: %w", err)
	}
	s := &Server{o: o, l: l, done: make(chan struct{}), tokens: map[string]time.Time{}}
	s.http = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.http.Serve(l) // http.ErrServerClosed after Close
	}()
	return s, nil
}

// Addr is the host:port to put in GCE_METADATA_HOST.
func (s *Server) Addr() string { return s.l.Addr().String() }

// Close stops the server and closes its connections.
func (s *Server) Close() {
	_ = s.http.Close()
	<-s.done
}

// TokenRequests is how many token requests arrived (refused ones too).
func (s *Server) TokenRequests() int64 { return s.asked.Load() }

// Refuse makes every later token request fail with status, as a VM's
// metadata server does when it has no service account (404) or will not
// hand one out. 0 hands tokens out again.
func (s *Server) Refuse(status int) {
	s.mu.Lock()
	s.refuse = status
	s.mu.Unlock()
}

// Revoke makes every token handed out so far invalid (Valid reports
// false for it), as when the service account is disabled or its key
// rotated. Tokens handed out later are valid unless Refuse is on.
func (s *Server) Revoke() {
	s.mu.Lock()
	for t := range s.tokens {
		s.tokens[t] = time.Time{}
	}
	s.mu.Unlock()
}

// Valid reports whether token was handed out here, has not expired and
// was not revoked.
func (s *Server) Valid(token string) bool {
	s.mu.Lock()
	exp, ok := s.tokens[token]
	s.mu.Unlock()
	return ok && time.Now().Before(exp)
}

// serve answers one request.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Metadata-Flavor", "Google")
	w.Header().Set("Content-Type", "application/text")
	if r.Header.Get("Metadata-Flavor") != "Google" {
		http.Error(w, "Missing required header: Metadata-Flavor", http.StatusForbidden)
		return
	}
	const sa = "/computeMetadata/v1/instance/service-accounts/default/"
	switch p := r.URL.Path; {
	case p == sa+"token":
		s.serveToken(w)
	case p == sa+"email":
		fmt.Fprint(w, s.o.Email)
	case p == sa+"scopes":
		fmt.Fprint(w, strings.Join(s.o.Scopes, "\n")+"\n")
	case p == "/computeMetadata/v1/project/project-id":
		fmt.Fprint(w, s.o.ProjectID)
	case p == "/computeMetadata/v1/project/numeric-project-id":
		fmt.Fprint(w, "123456789012")
	case p == "/computeMetadata/v1/universe/universe-domain":
		fmt.Fprint(w, "googleapis.com")
	default:
		http.NotFound(w, r)
	}
}

// serveToken hands out a new token, or refuses as told by Refuse.
func (s *Server) serveToken(w http.ResponseWriter) {
	s.asked.Add(1)
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	tok := "ya29.standin-" + hex.EncodeToString(b[:])
	s.mu.Lock()
	refuse := s.refuse
	if refuse == 0 {
		s.tokens[tok] = time.Now().Add(s.o.Lifetime)
	}
	s.mu.Unlock()
	if refuse != 0 {
		// What a VM without a service account answers (404), or any
		// status a test chose.
		http.Error(w, fmt.Sprintf("%d %s: no token for the default service account", refuse, http.StatusText(refuse)), refuse)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
		TokenType   string `json:"token_type"`
	}{tok, int64(s.o.Lifetime / time.Second), "Bearer"})
}
