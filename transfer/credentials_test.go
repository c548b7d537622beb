package transfer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"cloud.google.com/go/compute/metadata"
	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/metadataserver"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"github.com/bucketfs/bucketfs/internal/testutil/testemu"
)

// Credentials as on a VM: the tests here point the application default
// credentials at a metadata server stand-in (GCE_METADATA_HOST) and make
// the emulator accept only the tokens it hands out. They set the
// process's environment (t.Setenv), so none runs in parallel.

// decideOnVM makes cloud.google.com/go/compute/metadata take this
// process for one on a VM. It decides that once per process (OnGCE is
// memoized), from GCE_METADATA_HOST if set, else by probing the real
// metadata address; an anonymous NewGCS of another test can make it
// decide first, without the variable, and then no test finds the
// stand-in's credentials. The variable is set only while it decides:
// other tests reach no metadata server.
func decideOnVM() {
	os.Setenv("GCE_METADATA_HOST", "127.0.0.1:1")
	metadata.OnGCE()
	os.Unsetenv("GCE_METADATA_HOST")
}

// asVM starts a metadata server stand-in whose tokens last lifetime,
// makes this process use it as a VM would (and nothing else: no key
// file, no gcloud login), and returns it.
func asVM(t *testing.T, lifetime time.Duration) *metadataserver.Server {
	t.Helper()
	ms, err := metadataserver.Start(metadataserver.Options{Lifetime: lifetime})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Close)
	t.Setenv("GCE_METADATA_HOST", ms.Addr())
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("HOME", t.TempDir()) // no gcloud well-known file
	return ms
}

// newVMGCS returns a *GCS for bucketName of emu with the default
// credentials (not anonymous).
func newVMGCS(t *testing.T, emu *emulator.Server, o GCSOptions) *GCS {
	t.Helper()
	o.Endpoint = emu.URL()
	g, err := NewGCS(testutil.Ctx(t, 30*time.Second), bucketName, o)
	if err != nil {
		t.Fatalf("NewGCS with the metadata server's credentials: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// TestCredentialsRefreshedDuringTransfer downloads an object slowly
// enough that the client must fetch new tokens during it: tokens of 12 s,
// which golang.org/x/oauth2 uses for 2 s (it takes them as expired 10 s
// early), and a transfer of about 4 s in 16 range reads. Every request
// must carry a token the emulator accepts, and the tokens fetched must be
// about one per 2 s, not one per request.
func TestCredentialsRefreshedDuringTransfer(t *testing.T) {
	const lifetime, used = 12 * time.Second, 2 * time.Second
	ms := asVM(t, lifetime)
	emu := testemu.Start(t, emulator.Options{Buckets: []string{bucketName}, Tokens: ms,
		WAN: &emulator.WANProfile{Total: 1 << 20}})
	data := testutil.RandomBytes(4<<20, 23)
	gen := put(t, emu, "big", data)
	g := newVMGCS(t, emu, GCSOptions{})
	ctx := testutil.Ctx(t, time.Minute)

	start := time.Now()
	dst := newMemFile(len(data), 0)
	d := NewDownload(g, "big", gen, int64(len(data)), dst, nil, DownloadOptions{ChunkSize: 256 << 10, Parallelism: 2})
	defer d.Stop()
	d.Start() // two range reads at a time, one after the other
	waitClosed(t, ctx, d.Idle(), "the download to end")
	if err := d.Err(); err != nil {
		t.Fatalf("download with refreshed tokens: %v (the emulator refused %d requests)", err, emu.Unauthorized())
	}
	took := time.Since(start)
	if !bytes.Equal(dst.bytes(0, int64(len(data))), data) {
		t.Fatal("downloaded bytes differ from the object")
	}
	if n := emu.Unauthorized(); n != 0 {
		t.Errorf("the emulator refused %d requests for their token", n)
	}
	tokens, reqs := ms.TokenRequests(), emu.Requests()
	t.Logf("%d bucket requests in %v, %d tokens", reqs, took.Round(time.Millisecond), tokens)
	if took < used+used/2 {
		t.Fatalf("the transfer took %v: too short to outlive a token (%v); the test's shaping is off", took, used)
	}
	if tokens < 2 {
		t.Errorf("%d token fetched in %v: a token used past %v was not refreshed", tokens, took, used)
	}
	if max := int64(took/used) + 2; tokens > max {
		t.Errorf("%d tokens fetched for %d requests in %v: want at most %d (one per %v)", tokens, reqs, took, max, used)
	}
}

// TestCredentialsNoTokenAtStart: the metadata server hands out no token
// (a VM without a service account: 404). The first call fails at once
// with ErrNoToken, an ErrUnauthenticated, not with a network error
// (*url.Error: the mount would answer EIO and take the bucket as
// unreachable), and the metadata server is asked once per call, not in a
// loop. With a breaker on the client, the refusals do not make the
// bucket offline: they say nothing of the network to it.
func TestCredentialsNoTokenAtStart(t *testing.T) {
	ms := asVM(t, time.Hour)
	ms.Refuse(http.StatusNotFound)
	emu := testemu.Start(t, emulator.Options{Buckets: []string{bucketName}, Tokens: ms})
	g := newVMGCS(t, emu, GCSOptions{Breaker: &BreakerOptions{Failures: 1, Span: time.Nanosecond}})

	const calls = 3
	for i := range calls {
		start := time.Now()
		ctx := testutil.Ctx(t, 30*time.Second)
		err := g.CheckAccess(ctx)
		if !errors.Is(err, ErrNoToken) || !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("call %d: CheckAccess = %v, want ErrNoToken (an ErrUnauthenticated)", i, err)
		}
		var ue *url.Error
		if errors.As(err, &ue) || errors.Is(err, ErrOffline) {
			t.Errorf("call %d: CheckAccess = %v: a refused token taken for a network failure", i, err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("call %d: CheckAccess took %v to report the refusal", i, took)
		}
	}
	// The breaker, had it seen the refusals, would have opened within
	// milliseconds (a check probe that gets a refusal too): watch it
	// over half a second.
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if st := g.Breaker().State(); !st.Online {
			t.Fatalf("breaker offline after refused tokens: %+v", st)
		}
	}
	// The XML multipart API goes through the same credentials.
	mp, err := g.Multipart("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mp.Initiate(testutil.Ctx(t, 30*time.Second), "big"); !errors.Is(err, ErrNoToken) {
		t.Errorf("multipart Initiate with no token = %v, want ErrNoToken", err)
	}
	if n := ms.TokenRequests(); n < calls+1 || n > 2*(calls+1) {
		t.Errorf("the metadata server was asked %d times for %d calls: want one or two each, no retry loop", n, calls+1)
	}
	if n := emu.Requests(); n != 0 {
		t.Errorf("the bucket got %d requests without a token", n)
	}
}

// rejectAll is a TokenChecker that takes no token: a bucket that refuses
// the VM's credentials.
type rejectAll struct{}

func (rejectAll) Valid(string) bool { return false }

// TestCredentialsRefusedByBucket: the metadata server hands out tokens
// but the bucket refuses them (401). CheckAccess says
// ErrUnauthenticated (not ErrNoToken) without retrying; a download whose
// token is revoked midway fails with ErrUnauthenticated, one request per
// chunk at most.
func TestCredentialsRefusedByBucket(t *testing.T) {
	ms := asVM(t, time.Hour)
	refusing := testemu.Start(t, emulator.Options{Buckets: []string{bucketName}, Tokens: rejectAll{}})
	err := newVMGCS(t, refusing, GCSOptions{}).CheckAccess(testutil.Ctx(t, 30*time.Second))
	if !errors.Is(err, ErrUnauthenticated) || errors.Is(err, ErrNoToken) {
		t.Errorf("CheckAccess against a bucket refusing the token = %v, want ErrUnauthenticated from the bucket", err)
	}
	if n := refusing.Unauthorized(); n != 1 {
		t.Errorf("the bucket refused %d requests of one CheckAccess: want 1, no retries", n)
	}

	emu := testemu.Start(t, emulator.Options{Buckets: []string{bucketName}, Tokens: ms})
	data := testutil.RandomBytes(64<<10, 5)
	gen := put(t, emu, "obj", data)
	g := newVMGCS(t, emu, GCSOptions{})
	ctx := testutil.Ctx(t, 30*time.Second)
	if err := g.CheckAccess(ctx); err != nil {
		t.Fatalf("CheckAccess with a valid token: %v", err)
	}
	ms.Revoke()
	d := NewDownload(g, "obj", gen, int64(len(data)), newMemFile(len(data), 0), nil, DownloadOptions{ChunkSize: 16 << 10, Parallelism: 2})
	defer d.Stop()
	err = d.EnsureComplete(ctx)
	if !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("download with a revoked token = %v, want ErrUnauthenticated", err)
	}
	if n := emu.Unauthorized(); n < 1 || n > 4 {
		t.Errorf("the bucket refused %d requests of a download of 4 chunks: want 1 to 4, no retries", n)
	}
}

// TestCredentialsRefusedDuringStall: a request stalls (the bucket sends
// nothing) and the breaker's check probe, which would tell a black hole
// from a slow answer, gets no token. That says nothing of the bucket:
// the breaker stays online (before, it went offline, and reads on a
// mount failed with EIO instead of EACCES). Tokens of 10 s are used for
// no time (oauth2's 10 s margin), so every request asks for one.
func TestCredentialsRefusedDuringStall(t *testing.T) {
	ms := asVM(t, 10*time.Second)
	emu := testemu.Start(t, emulator.Options{Buckets: []string{bucketName}, Tokens: ms})
	gen := put(t, emu, "stall.bin", []byte("never sent"))
	emu.SetHook(func(r *http.Request) (int, bool) {
		if isMediaRead(r) {
			ms.Refuse(http.StatusNotFound) // from now on, no token
			<-r.Context().Done()           // and no answer
		}
		return 0, false
	})
	g := newVMGCS(t, emu, GCSOptions{Breaker: &BreakerOptions{Stall: 300 * time.Millisecond}, StallTimeout: -1})

	ctx, cancel := context.WithCancel(testutil.Ctx(t, 30*time.Second))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = g.ReadRange(ctx, "stall.bin", gen, 0, 10, io.Discard)
	}()
	defer func() { cancel(); <-done }()

	// The read asked for one token, the check probe for another.
	for deadline := time.Now().Add(10 * time.Second); ms.TokenRequests() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no check probe within 10 s of a stalled read (%d token requests)", ms.TokenRequests())
		}
	}
	// Had the probe's refusal counted, the breaker would open as soon as
	// the probe returned: watch it over half a second.
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if st := g.Breaker().State(); !st.Online {
			t.Fatalf("breaker offline after a check probe got no token: %s", st.Cause)
		}
	}
}
