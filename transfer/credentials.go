package transfer

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"cloud.google.com/go/compute/metadata"
	"cloud.google.com/go/storage"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// ErrNoToken means the credentials gave no access token: the metadata
// server of a VM refused one (no service account, say), or the token
// endpoint refused a key. It matches ErrUnauthenticated too.
var ErrNoToken = fmt.Errorf("%w: the credentials gave no access token", ErrUnauthenticated)

// withCredentials puts the application default credentials on base:
// GOOGLE_APPLICATION_CREDENTIALS, gcloud's well-known file, or, on a VM
// (or with GCE_METADATA_HOST set), the metadata server's tokens for the
// VM's service account. Tokens are reused until 10 s before they expire
// (golang.org/x/oauth2) and fetched again on the next request after
// that; a token request that fails is not retried here (the metadata
// client retries 5xx itself), its error reaches the call (see
// tokenRefusal).
func withCredentials(ctx context.Context, base http.RoundTripper) (http.RoundTripper, error) {
	creds, err := google.FindDefaultCredentials(ctx, storage.ScopeFullControl)
	if err != nil {
		return nil, fmt.Errorf("%w: %v (set GOOGLE_APPLICATION_CREDENTIALS, run 'gcloud auth application-default login', or pass --anonymous for a public bucket or an emulator)", ErrUnauthenticated, err)
	}
	return &oauth2.Transport{Source: creds.TokenSource, Base: base}, nil
}

// tokenRefusal returns the refusal in err if a request failed because
// no access token was given: an answer of the metadata server other than
// a token (metadata.Error, or NotDefinedError for its 404: no service
// account), or the token endpoint's refusal (oauth2.RetrieveError). Else
// nil: a metadata server that cannot be reached is a network failure.
func tokenRefusal(err error) error {
	var (
		re *oauth2.RetrieveError
		me *metadata.Error
		nd metadata.NotDefinedError
	)
	switch {
	case errors.As(err, &re):
		return re
	case errors.As(err, &me):
		return me
	case errors.As(err, &nd):
		return nd
	}
	return nil
}

// noToken classifies a token refusal (see tokenRefusal) as ErrNoToken,
// keeping its text but not the *url.Error around it: callers take a
// url.Error for a network failure.
func noToken(refusal error) error {
	return fmt.Errorf("%w: %v", ErrNoToken, refusal)
}
