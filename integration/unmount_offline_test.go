package integration

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil/faultproxy"
)

// Issue 22, item 2: an unmount while the bucket refuses connections, with
// the default --flush-timeout (10 minutes), ends after one failed probe,
// names what stays in the cache and exits 1; the next mount sends it.

// unmountOffline unmounts m with fusermount3 -u and returns how long the
// process took to exit; it fails the test if that is not within limit.
func unmountOffline(t *testing.T, m *mountProc, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if out, err := exec.Command("fusermount3", "-u", m.dir).CombinedOutput(); err != nil {
		t.Fatalf("fusermount3 -u: %v: %s", err, out)
	}
	select {
	case <-m.exited:
	case <-time.After(limit):
		t.Fatalf("bucketfs did not exit within %v of an unmount while the bucket is away:\n%s", limit, m.logs)
	}
	took := time.Since(start)
	t.Logf("the unmount took %v", took)
	var ee *exec.ExitError
	if !errors.As(m.waitErr, &ee) || ee.ExitCode() != 1 {
		t.Errorf("bucketfs exited with %v, want exit status 1 (changes left)", m.waitErr)
	}
	logs := m.logs.String()
	for _, want := range []string{"not in the bucket yet", "dir/late.txt", "the bucket is unreachable"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %q:\n%s", want, logs)
		}
	}
	return took
}

// The breaker is open when the unmount comes: the flush sends one probe,
// and stops when it fails.
func TestUnmountWhileOfflineEndsAtOnce(t *testing.T) {
	emu := startEmulator(t, nil)
	put(t, emu, "dir/a.txt", []byte("a"))
	cacheDir := t.TempDir()
	m, p := offlineMount(t, emu, cacheDir) // the default --flush-timeout
	if _, err := os.ReadDir(m.path("dir")); err != nil {
		t.Fatal(err)
	}
	if err := p.SetMode(faultproxy.Refuse()); err != nil {
		t.Fatal(err)
	}
	data := []byte("written while the bucket is away")
	if err := within(t, 10*time.Second, "writing", func() error { return os.WriteFile(m.path("dir/late.txt"), data, 0o644) }); err != nil {
		t.Fatal(err)
	}
	// Its upload (no write-back delay) finds the bucket away.
	pollUntil(t, 30*time.Second, "the mount goes offline", func() bool { return statusOf(t, m).Offline })
	if took := unmountOffline(t, m, 90*time.Second); took > 30*time.Second {
		t.Errorf("the unmount took %v; want one probe's time", took)
	}

	// Nothing is lost: the next mount sends it once the bucket is back.
	if err := p.SetMode(faultproxy.Pass()); err != nil {
		t.Fatal(err)
	}
	m2 := offlineMountVia(t, emu, p, cacheDir)
	pollUntil(t, 60*time.Second, "the change reaches the bucket from the next mount", func() bool {
		return bytes.Equal(object(t, emu, "dir/late.txt"), data)
	})
	m2.unmount(t)
}

// The breaker is still closed when the unmount comes (nothing was sent
// since the bucket went away): the flush's uploads find it away, the
// breaker opens after its probe, and the flush stops then.
func TestUnmountWhenBucketGoesAwayDuringFlush(t *testing.T) {
	emu := startEmulator(t, nil)
	put(t, emu, "dir/a.txt", []byte("a"))
	m, p := offlineMount(t, emu, "", "--write-back-delay", "1h")
	if _, err := os.ReadDir(m.path("dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.path("dir/late.txt"), []byte("late"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.SetMode(faultproxy.Refuse()); err != nil {
		t.Fatal(err)
	}
	if statusOf(t, m).Offline {
		t.Fatal("the mount went offline before the unmount; this test wants it to find out during the flush")
	}
	if took := unmountOffline(t, m, 90*time.Second); took > 45*time.Second {
		t.Errorf("the unmount took %v; want the seconds the breaker takes", took)
	}
	if object(t, emu, "dir/late.txt") != nil {
		t.Error("dir/late.txt reached the bucket through a proxy that refuses")
	}
}
