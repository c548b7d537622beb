package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
)

// The unit 'make install' puts in place passes systemd-analyze verify.
// verify checks that ExecStart names an executable file, so the unit is
// staged under a temporary DESTDIR and checked with its ExecStart pointing
// at the staged binary.
func TestSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze not found: install systemd (scripts/deps.sh does)")
	}
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, "make", "-C", "..", "install", "DESTDIR="+root, "BIN="+t.TempDir())
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("make install DESTDIR=%s: %v\n%s", root, err, out)
	}
	bin := filepath.Join(root, "usr/local/bin/bucketfs")
	if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("make install did not install an executable %s: %v", bin, err)
	}
	if target, err := os.Readlink(filepath.Join(root, "sbin/mount.fuse.bucketfs")); err != nil || target != "/usr/local/bin/bucketfs" {
		t.Errorf("mount helper symlink: %q, %v; want a link to /usr/local/bin/bucketfs", target, err)
	}
	unit, err := os.ReadFile(filepath.Join(root, "etc/systemd/system/bucketfs@.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Type=notify", "TimeoutStopSec=", "Restart=on-failure",
		"ExecStart=/usr/local/bin/bucketfs mount --config /etc/bucketfs/%i.yaml"} {
		if !bytes.Contains(unit, []byte(want)) {
			t.Errorf("unit lacks %q", want)
		}
	}
	staged := bytes.ReplaceAll(unit, []byte("ExecStart=/usr/local/bin/bucketfs"), []byte("ExecStart="+bin))
	path := filepath.Join(t.TempDir(), "bucketfs@.service")
	if err := os.WriteFile(path, staged, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, analyze, "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// Under systemd (Type=notify), the mount says READY=1 once it is live and
// STOPPING=1 when it starts to unmount, then flushes. The settings come
// from a --config file, which also asks for JSON logs.
func TestSystemdNotify(t *testing.T) {
	emu := startEmulator(t, nil)
	dir := t.TempDir()
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := make(chan string, 64)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-readerDone
	})

	config := filepath.Join(dir, "bucketfs.yaml")
	if err := os.WriteFile(config, []byte("write-back-delay: 1h\nlog-format: json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := mount(t, emu, mountOpts{args: []string{"--config", config}, env: []string{"NOTIFY_SOCKET=" + sock}})
	waitMessage(t, msgs, "READY=1", 10*time.Second)

	data := []byte("flushed at unmount, after STOPPING=1\n")
	if err := os.WriteFile(m.path("notify.txt"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := listObjects(t, emu, "notify.txt"); len(got) != 0 {
		t.Fatalf("uploaded before unmount despite write-back-delay: 1h in the config: %v", got)
	}
	m.unmount(t)
	waitMessage(t, msgs, "STOPPING=1", 10*time.Second)
	waitMessage(t, msgs, "STATUS=flushing", 10*time.Second)
	if got := object(t, emu, "notify.txt"); !bytes.Equal(got, data) {
		t.Errorf("bucket has %q after unmount", got)
	}
	for _, line := range strings.Split(strings.TrimSpace(m.logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["msg"] == nil || rec["level"] == nil {
			t.Errorf("log line is not a JSON record (log-format: json in the config): %q", line)
		}
	}
}

// waitMessage waits for a notify datagram containing want, failing the
// test after timeout. Datagrams before it are dropped.
func waitMessage(t *testing.T, msgs <-chan string, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	var seen []string
	for {
		select {
		case m := <-msgs:
			if strings.Contains(m, want) {
				return
			}
			seen = append(seen, m)
		case <-deadline:
			t.Fatalf("no %q on NOTIFY_SOCKET within %v; got %q", want, timeout, seen)
		}
	}
}

// A bucketfs killed with SIGKILL leaves a dead mount; the next start on the
// same mountpoint (systemd's Restart=on-failure) detaches it by itself and
// mounts, and uploads what the killed one had not. A dead mount of another
// bucket is not touched.
func TestRestartAfterKillClearsDeadMount(t *testing.T) {
	emu := startEmulator(t, nil)
	emu.CreateBucket("other-bucket")
	cacheDir := t.TempDir()
	m := mount(t, emu, mountOpts{cacheDir: cacheDir, args: []string{"--write-back-delay", "1h"}})
	data := []byte("written before the kill\n")
	if err := os.WriteFile(m.path("before-kill.txt"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	m.kill(t)
	if _, err := os.Stat(m.dir); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("after SIGKILL, stat of the mountpoint: %v; want ENOTCONN (a dead mount)", err)
	}

	code, out := runBucketfs(t, nil, "mount", "other-bucket", m.dir, "--endpoint", emu.URL(), "--anonymous", "--cache-dir", t.TempDir())
	if code != 1 || !strings.Contains(out, "is a dead FUSE mount") {
		t.Errorf("mount of another bucket on the dead mount: exit %d:\n%s", code, out)
	}

	m2 := mount(t, emu, mountOpts{cacheDir: cacheDir, dir: m.dir})
	m2.logs.waitFor(t, "detached the dead mount", time.Second)
	if got := readFile(t, m2.path("before-kill.txt")); !bytes.Equal(got, data) {
		t.Errorf("after restart, the file reads %q", got)
	}
	m2.unmount(t)
	if got := object(t, emu, "before-kill.txt"); !bytes.Equal(got, data) {
		t.Errorf("bucket has %q", got)
	}
}

// A bucketfs killed with SIGKILL in its first moments (as soon as its mount
// shows in the mount table, the kernel maybe still waiting for its INIT
// reply), or once it serves, leaves a mount that the next start on the
// same mountpoint replaces by itself, within a bounded wait. Once it
// served, stat of the dead mount's root is still answered from the
// kernel's attribute cache (the root was looked at when it mounted): the
// start used to take that for a live mount and fail with "busy".
func TestRestartAfterEarlyKill(t *testing.T) {
	emu := startEmulator(t, nil)
	dir, cacheDir := t.TempDir(), t.TempDir()
	for i := range 3 {
		m, err := spawnMount(t, emu, mountOpts{cacheDir: cacheDir, dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		killWhenMounted(t, m)
		restartOn(t, emu, dir, cacheDir, false).unmount(t)
		t.Logf("kill while mounting, round %d: restarted", i)
	}

	// Only stat: a readdir of the root would drop its cached attributes.
	m := mount(t, emu, mountOpts{cacheDir: cacheDir, dir: dir})
	if _, err := os.Stat(m.dir); err != nil {
		t.Fatal(err)
	}
	m.kill(t)
	_, err := os.Stat(dir)
	t.Logf("after the kill of a serving mount, stat of its root: %v", err)
	restartOn(t, emu, dir, cacheDir, true).unmount(t)
}

// killWhenMounted kills m with SIGKILL as soon as its mount shows in the
// mount table, and waits for it to exit.
func killWhenMounted(t *testing.T, m *mountProc) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !mounted(m.dir) {
		select {
		case <-m.exited:
			t.Fatalf("bucketfs exited before mounting (%v):\n%s", m.waitErr, m.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("bucketfs did not mount within 60s:\n%s", m.logs.String())
		}
		time.Sleep(time.Millisecond) // polling the mount table
	}
	m.kill(t)
}

// restartOn starts a new mount on dir, where a killed one may have left a
// dead mount, and checks that it mounts within 20s and serves; mustDetach:
// the log must say that it detached the dead mount.
func restartOn(t *testing.T, emu *emulator.Server, dir, cacheDir string, mustDetach bool) *mountProc {
	t.Helper()
	left := mounted(dir)
	start := time.Now()
	m2, err := startMount(t, emu, mountOpts{cacheDir: cacheDir, dir: dir})
	if err != nil {
		t.Fatalf("restart on the mountpoint of the killed mount (still in the mount table: %v): %v", left, err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the restart took %v", took)
	}
	detached := strings.Contains(m2.logs.String(), "detached the dead mount")
	t.Logf("restart: dead mount in the table before it: %v, detached: %v, took %v", left, detached, time.Since(start))
	if mustDetach && !detached {
		t.Errorf("the restart did not say that it detached the dead mount:\n%s", m2.logs.String())
	}
	if _, err := os.ReadDir(dir); err != nil {
		t.Errorf("the restarted mount: %v", err)
	}
	return m2
}

// A mount whose process is stopped (SIGSTOP) is alive, not dead: a start
// on its mountpoint leaves it alone and fails within a bounded wait,
// saying that it does not answer.
func TestStartBesideStoppedMount(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{})
	if err := m.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.cmd.Process.Signal(syscall.SIGCONT) }) // before the harness unmounts
	start := time.Now()
	code, out := runBucketfs(t, nil, "mount", testBucket, m.dir, "--endpoint", emu.URL(), "--anonymous", "--cache-dir", t.TempDir())
	if code != 1 || !strings.Contains(out, "did not answer") {
		t.Errorf("mount on a stopped mount: exit %d:\n%s", code, out)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the start took %v to give up", took)
	}
	if err := m.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadDir(m.dir); err != nil {
		t.Errorf("the stopped mount, continued: %v", err)
	}
	m.unmount(t)
}
