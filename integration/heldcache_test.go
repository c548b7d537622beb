package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil/faultproxy"
)

// Issue 22, item 2: a start on a cache directory that a live bucketfs
// holds says which process holds it, where it is mounted, and, once that
// one is unmounted and still flushing, how much it has left; never a
// network error, even when the bucket is away for the new start.
func TestStartOnHeldCacheDir(t *testing.T) {
	emu := startEmulator(t, nil)
	put(t, emu, "dir/a.txt", []byte("a"))
	cacheDir := t.TempDir()
	m := mount(t, emu, mountOpts{cacheDir: cacheDir, args: []string{"--write-back-delay", "1h"}})
	if _, err := os.ReadDir(m.path("dir")); err != nil {
		t.Fatal(err)
	}
	data := []byte("flushed at the unmount")
	if err := os.WriteFile(m.path("dir/late.txt"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	pid := fmt.Sprintf("pid %d", m.cmd.Process.Pid)

	// The new start finds the bucket away (a proxy that refuses).
	away := faultproxy.Start(t, strings.TrimPrefix(emu.URL(), "http://"))
	if err := away.SetMode(faultproxy.Refuse()); err != nil {
		t.Fatal(err)
	}
	start := func() string {
		t.Helper()
		code, out := runBucketfs(t, nil, "mount", testBucket, t.TempDir(), "--endpoint", away.URL(), "--anonymous",
			"--cache-dir", cacheDir, "--offline-after", "1s")
		if code != 1 {
			t.Errorf("a start on a held cache dir exited %d, want 1:\n%s", code, out)
		}
		if strings.Contains(out, "cannot reach bucket") || strings.Contains(out, "did not answer") {
			t.Errorf("a start on a held cache dir blames the network:\n%s", out)
		}
		return out
	}

	// Held by a live mount.
	out := start()
	for _, want := range []string{"in use by bucketfs", pid, "mounted on " + m.dir} {
		if !strings.Contains(out, want) {
			t.Errorf("a start on the cache dir of a live mount does not say %q:\n%s", want, out)
		}
	}

	// Held by a mount unmounted and still flushing: a slow bucket, whose
	// answer to the upload does not come until release.
	release := make(chan struct{})
	var once sync.Once
	lift := func() { once.Do(func() { close(release) }) }
	t.Cleanup(lift)
	emu.SetHook(func(r *http.Request) (int, bool) {
		if isUploadReq(r) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		return 0, false
	})
	if out, err := exec.Command("fusermount3", "-u", m.dir).CombinedOutput(); err != nil {
		t.Fatalf("fusermount3 -u: %v: %s", err, out)
	}
	m.logs.waitFor(t, "flushing changes to the bucket", 30*time.Second)
	out = start()
	t.Logf("a start on the cache dir of a flushing mount says:\n%s", out)
	for _, want := range []string{"in use by bucketfs", pid, "unmounted from " + m.dir, "still sending its changes", "1 files (22 B) left"} {
		if !strings.Contains(out, want) {
			t.Errorf("a start on the cache dir of a flushing mount does not say %q:\n%s", want, out)
		}
	}

	// The flush goes on, and ends well.
	lift()
	select {
	case <-m.exited:
	case <-time.After(90 * time.Second):
		t.Fatalf("the mount did not exit within 90s of the stall's end:\n%s", m.logs)
	}
	if m.waitErr != nil {
		t.Errorf("the flushing mount exited with %v:\n%s", m.waitErr, m.logs)
	}
	if got := object(t, emu, "dir/late.txt"); !bytes.Equal(got, data) {
		t.Errorf("dir/late.txt in the bucket: %q, want %q", got, data)
	}
}
