package metadataserver

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

// get asks s for key as a client on a VM does (with flavor: the header).
func get(t *testing.T, s *Server, key string, flavor bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+s.Addr()+"/computeMetadata/v1/"+key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if flavor {
		req.Header.Set("Metadata-Flavor", "Google")
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Metadata-Flavor") != "Google" {
		t.Errorf("%s: answer without Metadata-Flavor: Google", key)
	}
	return resp.StatusCode, string(body)
}

// TestTokens: tokens are handed out with expires_in, valid until then,
// invalid once revoked; Refuse answers 404 as a VM without a service
// account does; requests without the flavor header are refused.
func TestTokens(t *testing.T) {
	s, err := Start(Options{Lifetime: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const key = "instance/service-accounts/default/token?scopes=x"
	if code, _ := get(t, s, key, false); code != http.StatusForbidden {
		t.Errorf("token request without Metadata-Flavor: %d, want 403", code)
	}
	code, body := get(t, s, key, true)
	var tok struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
		TokenType   string `json:"token_type"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &tok) != nil || tok.TokenType != "Bearer" || tok.ExpiresIn != 1 {
		t.Fatalf("token answer %d %q: want 200, a Bearer token, expires_in 1 (0.5 s rounded up)", code, body)
	}
	if !s.Valid(tok.AccessToken) || s.Valid("other") {
		t.Errorf("Valid: the token handed out is not valid, or an unknown one is")
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Valid(tok.AccessToken) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // polling for the expiry, with a deadline
	}
	if s.Valid(tok.AccessToken) {
		t.Errorf("token still valid 10 s after its 1 s expiry")
	}

	_, body = get(t, s, key, true)
	_ = json.Unmarshal([]byte(body), &tok)
	s.Revoke()
	if s.Valid(tok.AccessToken) {
		t.Errorf("a revoked token is valid")
	}
	s.Refuse(http.StatusNotFound)
	if code, _ := get(t, s, key, true); code != http.StatusNotFound {
		t.Errorf("refused token request: %d, want 404", code)
	}
	if n := s.TokenRequests(); n != 3 {
		t.Errorf("TokenRequests = %d, want 3 (the one without the header is not one)", n)
	}
	if code, body := get(t, s, "project/project-id", true); code != http.StatusOK || body != "bucketfs-test" {
		t.Errorf("project-id: %d %q", code, body)
	}
}
