package integration

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 22, item 1: 'bucketfs mount ... 2>&1 | head -1', a write, then
// 'fusermount3 -u': the log line that follows the unmount goes to a pipe
// nobody reads. The daemon must not die of it: it flushes the change and
// exits 0 as usual.
func TestBrokenLogPipeStillFlushes(t *testing.T) {
	emu := startEmulator(t, nil)
	dir, cacheDir := t.TempDir(), t.TempDir()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// A long write-back delay: the change goes up at the unmount's flush,
	// not before.
	cmd := exec.Command(binPath, "mount", testBucket, dir, "--endpoint", emu.URL(), "--anonymous",
		"--cache-dir", cacheDir, "--write-back-delay", "1h")
	cmd.Stdout, cmd.Stderr = w, w // 2>&1 |
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	m := &mountProc{dir: dir, cacheDir: cacheDir, cmd: cmd, logs: &syncBuffer{},
		ready: make(chan struct{}), exited: make(chan struct{})}
	t.Cleanup(func() {
		m.stop()
		if t.Failed() {
			t.Logf("bucketfs log, up to the mount:\n%s", m.logs.String())
		}
	})
	go func() {
		// Like head: read up to the line that says it mounted, then go
		// away.
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			m.logs.add(sc.Text())
			if strings.Contains(sc.Text(), "msg=mounted") {
				break
			}
		}
		close(m.ready)
		r.Close()
		m.waitErr = cmd.Wait()
		close(m.exited)
	}()
	select {
	case <-m.ready:
	case <-time.After(60 * time.Second):
		t.Fatal("bucketfs did not mount within 60s")
	}
	if !mounted(dir) {
		t.Fatalf("bucketfs stopped logging before it mounted:\n%s", m.logs.String())
	}

	data := []byte("x\n")
	if err := os.WriteFile(m.path("f1"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("fusermount3", "-u", dir).CombinedOutput(); err != nil {
		t.Fatalf("fusermount3 -u: %v: %s", err, out)
	}
	wantCleanExit(t, m, "the unmount")
	if got := object(t, emu, "f1"); !bytes.Equal(got, data) {
		t.Errorf("f1 in the bucket after the unmount: %q, want %q", got, data)
	}
}

// A mount run in a terminal that is closed gets SIGHUP (and its stderr
// then fails with EIO). Like Ctrl-C, it unmounts and flushes: the change
// reaches the bucket and the exit status is 0, instead of a process
// killed by the signal with its change left in the cache and a dead
// mount left behind.
func TestHangupUnmountsAndFlushes(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "1h"}})
	data := []byte("written before the terminal closed\n")
	if err := os.WriteFile(m.path("f1"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	wantCleanExit(t, m, "SIGHUP")
	if mounted(m.dir) {
		t.Errorf("%s is still mounted after SIGHUP", m.dir)
	}
	if got := object(t, emu, "f1"); !bytes.Equal(got, data) {
		t.Errorf("f1 in the bucket after SIGHUP: %q, want %q", got, data)
	}
}

// wantCleanExit waits up to 60 s for m's process to exit after what (the
// unmount, a signal), and fails the test unless it exited 0: not killed
// by a signal, its changes flushed.
func wantCleanExit(t *testing.T, m *mountProc, what string) {
	t.Helper()
	select {
	case <-m.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("bucketfs did not exit within 60s of %s", what)
	}
	var ee *exec.ExitError
	if errors.As(m.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("bucketfs was killed by %v after %s", ws.Signal(), what)
		}
	}
	if m.waitErr != nil {
		t.Errorf("bucketfs exited with %v after %s, want 0 (its changes were flushed)", m.waitErr, what)
	}
}
