package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"github.com/bucketfs/bucketfs/internal/testutil/faultproxy"
)

// Outages (issue 13): the mount reaches the emulator through a fault
// proxy that can refuse connections or black-hole them.

// offlineMount mounts through a fault proxy (in Pass mode) with a long
// metadata TTL (known names and listings answer without the bucket).
func offlineMount(t *testing.T, emu *emulator.Server, cacheDir string, extra ...string) (*mountProc, *faultproxy.Proxy) {
	t.Helper()
	p := faultproxy.Start(t, strings.TrimPrefix(emu.URL(), "http://"))
	return offlineMountVia(t, emu, p, cacheDir, extra...), p
}

func offlineMountVia(t *testing.T, emu *emulator.Server, p *faultproxy.Proxy, cacheDir string, extra ...string) *mountProc {
	t.Helper()
	args := append([]string{"--endpoint", p.URL(), "--metadata-ttl", "10m", "--write-back-delay", "0", "--offline-after", "1s"}, extra...)
	return mount(t, emu, mountOpts{cacheDir: cacheDir, args: args})
}

// within runs f and fails the test if it does not return within limit
// (the call is left running: a hung FUSE call cannot be cut short).
func within[T any](t *testing.T, limit time.Duration, what string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(limit):
		t.Fatalf("%s did not return within %v", what, limit)
		var zero T
		return zero
	}
}

// pollUntil waits until cond holds, or fails the test after limit.
func pollUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type offlineStatus struct {
	Offline    bool `json:"offline"`
	DirtyFiles int  `json:"dirty_files"`
}

func statusOf(t *testing.T, m *mountProc) offlineStatus {
	t.Helper()
	code, out := runBucketfs(t, nil, "status", "--cache-dir", m.cacheDir, "--json")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, out)
	}
	var st offlineStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status output: %v\n%s", err, out)
	}
	return st
}

func testOutage(t *testing.T, fault faultproxy.Mode) {
	emu := startEmulator(t, nil)
	cached := testutil.RandomBytes(1<<20, 1)
	put(t, emu, "dir/cached.bin", cached)
	put(t, emu, "dir/uncached.bin", testutil.RandomBytes(300<<10, 2))
	put(t, emu, "dir/shared.txt", []byte("base"))
	m, p := offlineMount(t, emu, "", "--metrics-addr", "127.0.0.1:0")
	metrics := m.metricsURL(t)
	if v := scrape(t, metrics)["bucketfs_bucket_reachable"]; v != 1 {
		t.Errorf("bucketfs_bucket_reachable = %v before the outage, want 1", v)
	}

	// Known before the outage: a cached file, a listing, a cached file
	// both sides change.
	if got := readFile(t, m.path("dir/cached.bin")); !bytes.Equal(got, cached) {
		t.Fatal("cached.bin read wrong before the outage")
	}
	readFile(t, m.path("dir/shared.txt"))
	if _, err := os.ReadDir(m.path("dir")); err != nil {
		t.Fatal(err)
	}

	if err := p.SetMode(fault); err != nil {
		t.Fatal(err)
	}
	// Cached files read, known directories list: no request needed.
	got := within(t, 5*time.Second, "reading a cached file", func() []byte { b, _ := os.ReadFile(m.path("dir/cached.bin")); return b })
	if !bytes.Equal(got, cached) {
		t.Fatal("cached.bin read wrong during the outage")
	}
	ents := within(t, 5*time.Second, "listing a known directory", func() []os.DirEntry { e, _ := os.ReadDir(m.path("dir")); return e })
	if len(ents) != 3 {
		t.Fatalf("listing during the outage: %d entries, want 3", len(ents))
	}
	// An object not cached fails with EIO, within seconds, never with a
	// network errno; and twice gives one log line for it.
	for range 2 {
		err := within(t, 30*time.Second, "reading an uncached file", func() error { _, err := os.ReadFile(m.path("dir/uncached.bin")); return err })
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("reading an uncached file while offline: %v, want EIO", err)
		}
	}
	// The daemon logs before it answers, but its log reaches m.logs
	// through a pipe the harness reads: wait for the lines to arrive.
	pollUntil(t, 10*time.Second, "the outage's log lines", func() bool {
		l := m.logs.String()
		return strings.Contains(l, "object=dir/uncached.bin") && strings.Contains(l, "working offline")
	})
	if n := strings.Count(m.logs.String(), "object=dir/uncached.bin"); n != 1 {
		t.Errorf("%d log lines name dir/uncached.bin, want 1:\n%s", n, m.logs)
	}
	if n := strings.Count(m.logs.String(), "working offline"); n != 1 {
		t.Errorf("%d log lines say the mount went offline, want 1:\n%s", n, m.logs)
	}
	if !statusOf(t, m).Offline {
		t.Error("status does not say offline")
	}
	if v := scrape(t, metrics)["bucketfs_bucket_reachable"]; v != 0 {
		t.Errorf("bucketfs_bucket_reachable = %v during the outage, want 0", v)
	}

	// Changes are written locally and queued; both sides change shared.txt.
	newData := []byte("made offline\n")
	within(t, 10*time.Second, "writing a new file", func() error { return os.WriteFile(m.path("dir/new.txt"), newData, 0o644) })
	changed := append(bytes.Clone(cached[:1000]), "changed offline"...)
	if err := within(t, 10*time.Second, "rewriting a cached file", func() error { return os.WriteFile(m.path("dir/cached.bin"), changed, 0o644) }); err != nil {
		t.Fatal(err)
	}
	if err := within(t, 10*time.Second, "changing shared.txt", func() error { return os.WriteFile(m.path("dir/shared.txt"), []byte("mine"), 0o644) }); err != nil {
		t.Fatal(err)
	}
	put(t, emu, "dir/shared.txt", []byte("theirs")) // another writer, meanwhile
	if got := readFile(t, m.path("dir/new.txt")); !bytes.Equal(got, newData) {
		t.Fatal("new.txt reads wrong while offline")
	}
	if object(t, emu, "dir/new.txt") != nil {
		t.Fatal("new.txt reached the bucket during the outage")
	}

	// The bucket comes back: the changes go up by themselves.
	if err := p.SetMode(faultproxy.Pass()); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 60*time.Second, "changes reach the bucket after the outage", func() bool {
		return bytes.Equal(object(t, emu, "dir/new.txt"), newData) && bytes.Equal(object(t, emu, "dir/cached.bin"), changed) &&
			len(listObjects(t, emu, "dir/shared.txt.bucketfs-conflict-")) == 1
	})
	if got := string(object(t, emu, "dir/shared.txt")); got != "theirs" {
		t.Errorf("shared.txt = %q, want the other writer's version to stay", got)
	}
	sib := listObjects(t, emu, "dir/shared.txt.bucketfs-conflict-")
	if string(object(t, emu, sib[0])) != "mine" {
		t.Errorf("conflict copy holds %q, want the local version", object(t, emu, sib[0]))
	}
	pollUntil(t, 10*time.Second, "the log saying the bucket is back", func() bool {
		return strings.Contains(m.logs.String(), "back online")
	})
	if statusOf(t, m).Offline {
		t.Error("status says offline after the outage")
	}
	if v := scrape(t, metrics)["bucketfs_bucket_reachable"]; v != 1 {
		t.Errorf("bucketfs_bucket_reachable = %v after the outage, want 1", v)
	}
	m.unmount(t)
}

func TestOutageRefused(t *testing.T)   { testOutage(t, faultproxy.Refuse()) }
func TestOutageBlackHole(t *testing.T) { testOutage(t, faultproxy.BlackHole()) }

// Unmounting during an outage ends within --flush-timeout, names what is
// left, and loses nothing: the next mount sends it when the bucket is back.
func TestUnmountDuringOutage(t *testing.T) {
	emu := startEmulator(t, nil)
	put(t, emu, "dir/a.txt", []byte("a"))
	cacheDir := t.TempDir()
	m, p := offlineMount(t, emu, cacheDir, "--flush-timeout", "3s")
	if _, err := os.ReadDir(m.path("dir")); err != nil {
		t.Fatal(err)
	}
	if err := p.SetMode(faultproxy.BlackHole()); err != nil {
		t.Fatal(err)
	}
	data := []byte("written during the outage")
	if err := within(t, 10*time.Second, "writing", func() error { return os.WriteFile(m.path("dir/late.txt"), data, 0o644) }); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("unmount during an outage did not end:\n%s", m.logs)
	}
	t.Logf("unmount took %v", time.Since(start))
	if m.waitErr == nil {
		t.Error("unmount with changes left exited 0")
	}
	if logs := m.logs.String(); !strings.Contains(logs, "dir/late.txt") || !strings.Contains(logs, "not in the bucket yet") {
		t.Errorf("the log does not name what is left:\n%s", logs)
	}
	// Started again while the bucket is still away, it starts offline and
	// serves what it knew (names.db was closed cleanly): the directory's
	// listing with the queued change shown over it, and both files.
	m2 := offlineMountVia(t, emu, p, cacheDir)
	if !statusOf(t, m2).Offline {
		t.Error("status does not say offline")
	}
	var listed []string
	ents, err := os.ReadDir(m2.path("dir"))
	if err != nil {
		t.Fatalf("listing a known directory of a mount started offline: %v", err)
	}
	for _, e := range ents {
		listed = append(listed, e.Name())
	}
	if !slices.Equal(listed, []string{"a.txt", "late.txt"}) {
		t.Errorf("a mount started offline lists %v, want [a.txt late.txt]", listed)
	}
	if got := readFile(t, m2.path("dir/late.txt")); !bytes.Equal(got, data) {
		t.Errorf("dir/late.txt read %q offline, want %q", got, data)
	}
	if err := p.SetMode(faultproxy.Pass()); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 60*time.Second, "the change reaches the bucket after a remount", func() bool {
		return bytes.Equal(object(t, emu, "dir/late.txt"), data)
	})
	m2.unmount(t)
}

// A mount whose bucket is away starts from a cache that knows it, says so
// in one line, queues, and goes online when the bucket answers; with an
// empty cache it fails as before.
func TestOfflineStart(t *testing.T) {
	emu := startEmulator(t, nil)
	put(t, emu, "a.txt", []byte("a"))
	cacheDir := t.TempDir()
	m, p := offlineMount(t, emu, cacheDir, "--write-back-delay", "1h")
	readFile(t, m.path("a.txt"))
	data := []byte("queued before the crash")
	if err := os.WriteFile(m.path("queued.txt"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.SetMode(faultproxy.Refuse()); err != nil {
		t.Fatal(err)
	}
	m.crash(t) // the change stays in the cache, not sent

	// Empty cache: fails at start, as before.
	code, out := runBucketfs(t, nil, "mount", testBucket, t.TempDir(), "--endpoint", p.URL(), "--anonymous",
		"--cache-dir", t.TempDir(), "--offline-after", "1s")
	if code != 1 || !strings.Contains(out, "cannot reach bucket") {
		t.Errorf("a start with an empty cache and no bucket: exit %d, want 1 and 'cannot reach bucket':\n%s", code, out)
	}

	m2 := offlineMountVia(t, emu, p, cacheDir) // mount() bounds the wait
	logs := m2.logs.String()
	if n := strings.Count(logs, "level=WARN"); n != 1 || !strings.Contains(logs, "starting offline") {
		t.Errorf("an offline start logged %d warnings, want one that says it starts offline:\n%s", n, logs)
	}
	if !statusOf(t, m2).Offline {
		t.Error("status does not say offline")
	}
	if object(t, emu, "queued.txt") != nil {
		t.Fatal("queued.txt in the bucket while it was away")
	}
	if err := p.SetMode(faultproxy.Pass()); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 60*time.Second, "the queued change reaches the bucket when it is back", func() bool {
		return bytes.Equal(object(t, emu, "queued.txt"), data)
	})
	m2.logs.waitFor(t, "back online", 10*time.Second)
	m2.unmount(t)
}
