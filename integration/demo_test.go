package integration

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// demoRun is one run of scripts/demo.sh (make demo without the build),
// in a process group of its own, as a terminal runs it.
type demoRun struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	mnt    string
	state  string
	exited chan struct{}
}

// startDemo runs scripts/demo.sh with bin (holding bucketfs and
// bucketfs-emulator), mnt and state, on a free port, and waits until its
// mount is up. The run is stopped at the end of the test whatever happens.
func startDemo(t *testing.T, bin, mnt, state string) *demoRun {
	t.Helper()
	d := &demoRun{out: &syncBuffer{}, mnt: mnt, state: state, exited: make(chan struct{})}
	d.cmd = exec.Command("bash", "../scripts/demo.sh")
	d.cmd.Env = append(os.Environ(), "DEMO_ADDR=127.0.0.1:0", "DEMO_MNT="+mnt, "DEMO_STATE="+state, "DEMO_BIN="+bin)
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = d.cmd.Stdout
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.stop(t)
		if t.Failed() {
			t.Logf("the demo's output:\n%s", d.out)
		}
	})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			d.out.add(sc.Text())
		}
		d.cmd.Wait()
		close(d.exited)
	}()
	d.out.waitFor(t, "msg=mounted", 2*time.Minute)
	return d
}

// stop sends Ctrl-C (SIGINT to the process group, which the emulator is
// not in) and waits for the demo to end: the mount flushes and exits,
// then the script stops the emulator. Whatever is left after a minute
// is killed and unmounted.
func (d *demoRun) stop(t *testing.T) {
	select {
	case <-d.exited:
	default:
		syscall.Kill(-d.cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-d.exited:
		case <-time.After(time.Minute):
			t.Errorf("the demo did not end within a minute of Ctrl-C:\n%s", d.out)
			syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.exited
		}
	}
	if mounted(d.mnt) {
		exec.Command("fusermount3", "-uz", d.mnt).Run()
	}
	// The emulator, in a session of its own, if the script's trap did not
	// stop it.
	b, err := os.ReadFile(filepath.Join(d.state, "emulator.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return
	}
	if cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil && bytes.Contains(cmdline, []byte("bucketfs-emulator")) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestDemoStartsClean: make demo twice with the same state directory.
// Each run has a new in-memory bucket, so the second run must show none
// of the first run's names, and a file written again must reach the new
// bucket as itself, not as a conflict copy (its base generation was the
// old bucket's). Before scripts/demo.sh removed the previous cache, the
// file written again in the second run was saved as a conflict copy, and
// its own name then read ENOENT.
func TestDemoStartsClean(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the emulator and mounts twice")
	}
	bin := t.TempDir()
	if err := os.Symlink(binPath, filepath.Join(bin, "bucketfs")); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "bucketfs-emulator"), "../cmd/bucketfs-emulator")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the emulator: %v\n%s", err, out)
	}
	dir := t.TempDir()
	mnt, state := filepath.Join(dir, "mnt"), filepath.Join(dir, "state")

	d := startDemo(t, bin, mnt, state)
	if _, err := os.Stat(filepath.Join(mnt, "README.txt")); err != nil {
		t.Fatalf("the sample data is not there: %v", err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "mine.txt"), []byte("first run"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	if strings.Contains(d.out.String(), "removing the previous run's cache") {
		t.Errorf("the first run found a cache to remove:\n%s", d.out)
	}

	d = startDemo(t, bin, mnt, state)
	if !strings.Contains(d.out.String(), "removing the previous run's cache") {
		t.Errorf("the second run did not say it removed the first run's cache:\n%s", d.out)
	}
	if _, err := os.Stat(filepath.Join(mnt, "mine.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the second run shows the first run's file (stat: %v); it is not in the new bucket", err)
	}
	want := []byte("second run")
	if err := os.WriteFile(filepath.Join(mnt, "mine.txt"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := runBucketfs(t, nil, "flush", mnt); code != 0 {
		t.Fatalf("bucketfs flush: exit %d: %s", code, out)
	}
	names, err := os.ReadDir(mnt)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.Contains(n.Name(), ".bucketfs-conflict-") {
			t.Errorf("a conflict copy in the second run: %s", n.Name())
		}
	}
	if got := readFile(t, filepath.Join(mnt, "mine.txt")); !bytes.Equal(got, want) {
		t.Errorf("mine.txt reads %q, want %q", got, want)
	}
	d.stop(t)
}
