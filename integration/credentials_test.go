package integration

import (
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/control"
	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/metadataserver"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"github.com/bucketfs/bucketfs/internal/testutil/testemu"
)

// Credentials as on a VM: the daemon gets GCE_METADATA_HOST pointing at
// a metadata server stand-in, no key file and no gcloud login, and mounts
// with --anonymous=false; the emulator takes only the stand-in's tokens.

// startVM starts a metadata server stand-in (tokens of lifetime) and an
// emulator that checks its tokens, and returns them with the environment
// that makes bucketfs use the stand-in.
func startVM(t *testing.T, lifetime time.Duration) (*metadataserver.Server, *emulator.Server, []string) {
	t.Helper()
	ms, err := metadataserver.Start(metadataserver.Options{Lifetime: lifetime})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Close)
	emu := testemu.Start(t, emulator.Options{Buckets: []string{testBucket}, Tokens: ms})
	env := []string{"GCE_METADATA_HOST=" + ms.Addr(), "GOOGLE_APPLICATION_CREDENTIALS=", "HOME=" + t.TempDir()}
	return ms, emu, env
}

// TestCredentialsRefusedAtStart: the metadata server gives no token (a
// VM without a service account). 'bucketfs mount' exits 1 within
// seconds, saying the credentials gave no token, after asking the
// metadata server a few times, not in a loop; the bucket got nothing.
func TestCredentialsRefusedAtStart(t *testing.T) {
	ms, emu, env := startVM(t, time.Hour)
	ms.Refuse(http.StatusNotFound)
	start := time.Now()
	code, out := runBucketfs(t, env, "mount", testBucket, t.TempDir(), "--endpoint", emu.URL(),
		"--anonymous=false", "--cache-dir", t.TempDir())
	took := time.Since(start)
	if code != 1 || !strings.Contains(out, "gave no access token") || !strings.Contains(out, "service account") {
		t.Errorf("mount with no token exited %d, want 1 saying the credentials gave no token:\n%s", code, out)
	}
	if took > 10*time.Second {
		t.Errorf("mount took %v to give up", took)
	}
	if n := ms.TokenRequests(); n < 1 || n > 3 {
		t.Errorf("the metadata server was asked %d times for a token: want 1 to 3", n)
	}
	if n := emu.Requests(); n != 0 {
		t.Errorf("the bucket got %d requests without a token", n)
	}
}

// TestCredentialsRefusedWhileMounted: a mount on a VM's credentials
// whose tokens go bad (revoked, and no new one handed out). Tokens last
// 11 s, which the client uses for 1 s, so the mount soon asks for a new
// one and is refused. A read of an uncached file fails with EACCES (not
// EIO: the bucket is not offline), a changed file is held as refused
// ('bucketfs status'), and neither the metadata server nor the bucket is
// asked in a loop.
func TestCredentialsRefusedWhileMounted(t *testing.T) {
	ms, emu, env := startVM(t, 11*time.Second)
	data := testutil.RandomBytes(64<<10, 3)
	for _, name := range []string{"cold1", "cold2"} {
		if _, err := emu.Put(testBucket, name, data); err != nil {
			t.Fatal(err)
		}
	}
	m := mount(t, emu, mountOpts{env: env, args: []string{"--anonymous=false", "--write-back-delay", "1h"}})
	for _, name := range []string{"cold1", "cold2"} {
		if _, err := os.Stat(m.path(name)); err != nil {
			t.Fatalf("stat with valid credentials: %v", err)
		}
	}
	// Created while the credentials are good (a new name is looked up in
	// the bucket first), uploaded (by the flush) once they are not.
	if err := os.WriteFile(m.path("new.txt"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}

	ms.Refuse(http.StatusNotFound)
	ms.Revoke()
	// The bucket refuses the token the mount holds (401)...
	start := time.Now()
	if _, err := os.ReadFile(m.path("cold1")); !errors.Is(err, syscall.EACCES) {
		t.Errorf("read of an uncached file with a revoked token: %v, want EACCES", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the refused read took %v", took)
	}
	// ... until the mount asks for a new one (within 1 s), which the
	// metadata server refuses: reads fail as before.
	asked := ms.TokenRequests()
	for deadline := time.Now().Add(10 * time.Second); ms.TokenRequests() == asked; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the mount asked for no new token within 10 s of its token's end")
		}
		if _, err := os.ReadFile(m.path("cold1")); !errors.Is(err, syscall.EACCES) {
			t.Fatalf("read with a revoked token: %v, want EACCES", err)
		}
	}
	if _, err := os.ReadFile(m.path("cold1")); !errors.Is(err, syscall.EACCES) {
		t.Errorf("read of an uncached file with no token: %v, want EACCES", err)
	}
	if code, out := runBucketfs(t, nil, "flush", m.dir, "--timeout", "20s"); code != 1 || !strings.Contains(out, "new.txt") {
		t.Errorf("flush with no token exited %d, want 1 naming new.txt:\n%s", code, out)
	}
	st := waitRefused(t, m, "new.txt")
	if st.Offline {
		t.Errorf("the mount took refused credentials for an offline bucket: %s", st.OfflineCause)
	}

	// No retry loop: over the next 3 s (polling status, another read
	// refused on the way), each of them is asked a few times at most. A
	// loop (a breaker probing, an upload retried, a token asked for per
	// attempt) asks them every few hundred milliseconds.
	tokens, reqs := ms.TokenRequests(), emu.Requests()
	if _, err := os.ReadFile(m.path("cold2")); !errors.Is(err, syscall.EACCES) {
		t.Errorf("second read with refused credentials: %v, want EACCES", err)
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if st := m.status(t); st.Offline || !slices.ContainsFunc(st.Refused, func(r control.RefusedFile) bool { return r.Name == "new.txt" }) {
			t.Fatalf("status changed while the credentials stay refused: offline %v, refused %+v", st.Offline, st.Refused)
		}
	}
	if n := ms.TokenRequests() - tokens; n > 6 {
		t.Errorf("the metadata server was asked %d times in 3 s after the refusal (one read): a retry loop", n)
	}
	if n := emu.Requests() - reqs; n > 6 {
		t.Errorf("the bucket got %d requests in 3 s after the refusal (one read): a retry loop", n)
	}
	t.Logf("in the window: %d token requests, %d bucket requests", ms.TokenRequests()-tokens, emu.Requests()-reqs)
	if got := object(t, emu, "new.txt"); got != nil {
		t.Errorf("new.txt reached the bucket with refused credentials: %q", got)
	}
}

// waitRefused polls 'bucketfs status' until name is listed as refused,
// and returns that status.
func waitRefused(t *testing.T, m *mountProc, name string) control.Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := m.status(t)
		if slices.ContainsFunc(st.Refused, func(r control.RefusedFile) bool { return r.Name == name }) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not refused in status after 30 s: refused %+v, errors %+v", name, st.Refused, st.Errors)
		}
		time.Sleep(100 * time.Millisecond) // polling, with a deadline
	}
}
