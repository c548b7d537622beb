package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
	"golang.org/x/sys/unix"
)

// Environment of a test binary run again by runInMountNamespace.
const (
	testBinEnv     = "BUCKETFS_TEST_BIN"      // the bucketfs binary, already built
	testMountNSEnv = "BUCKETFS_TEST_MOUNT_NS" // set inside the namespace
)

// mount(8) finds helpers only in /sbin (mount.fuse.bucketfs) and, through
// mount.fuse3, in the default PATH (bucketfs in /usr/local/bin): it passes
// no PATH on. The test puts the binary there in a private mount namespace
// (a bind mount over the directory, seen by nobody else and gone with the
// test process), where it mounts with mount -t fuse.bucketfs, reads and
// writes, unmounts with umount, and checks that the daemon the helper left
// running exits 0 having flushed.
func TestFstabMount(t *testing.T) {
	if os.Getenv(testMountNSEnv) == "" {
		runInMountNamespace(t, "TestFstabMount")
		return
	}
	t.Run("helper in /sbin", func(t *testing.T) {
		bindDir(t, "/sbin", map[string]string{"mount.fuse.bucketfs": binPath})
		testFstabMount(t)
	})
	t.Run("through mount.fuse3", func(t *testing.T) {
		if _, err := os.Stat("/sbin/mount.fuse3"); err != nil {
			t.Skip("no /sbin/mount.fuse3 (package fuse3)")
		}
		bindDir(t, "/usr/local/bin", map[string]string{"bucketfs": binPath})
		testFstabMount(t)
	})
}

func testFstabMount(t *testing.T) {
	emu := startEmulator(t, nil)
	put(t, emu, "seed.txt", []byte("from the bucket"))
	mnt, cacheDir := t.TempDir(), t.TempDir()
	logFile := filepath.Join(t.TempDir(), "bucketfs.log")
	// What an fstab line would hold: generic options, bucketfs flags by
	// name with _ and with -, a bool flag alone.
	opts := strings.Join([]string{"rw", "nosuid", "nodev", "_netdev", "nofail", "x-systemd.requires=network-online.target",
		"endpoint=" + emu.URL(), "anonymous", "cache_dir=" + cacheDir, "write-back-delay=1h", "log_file=" + logFile}, ",")

	// Errors come back through mount(8), and nothing is mounted.
	code, out := runMount(t, "-t", "fuse.bucketfs", "-o", opts+",cache_size=1GiB", testBucket, mnt)
	if code != 1 || !strings.Contains(out, `unknown option "cache_size"`) {
		t.Errorf("unknown option: exit %d, output %q", code, out)
	}
	code, out = runMount(t, "-t", "fuse.bucketfs", "-o", opts, "no-such-bucket", mnt)
	if code != 32 || !strings.Contains(out, "bucket gs://no-such-bucket at "+emu.URL()+" does not exist") {
		t.Errorf("missing bucket: exit %d, output %q", code, out)
	}
	if mounted(mnt) {
		t.Fatalf("%s mounted after failed mounts", mnt)
	}

	// The daemon outlives the helper; it is reparented to this process,
	// which can then wait for it.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	t.Cleanup(func() {
		if mounted(mnt) {
			exec.Command("umount", mnt).Run()
			exec.Command("fusermount3", "-uz", mnt).Run()
		}
		if t.Failed() {
			log, _ := os.ReadFile(logFile)
			t.Logf("bucketfs log:\n%s", log)
		}
	})
	// CombinedOutput reads mount's output to its end: the daemon must not
	// hold it open.
	if code, out := runMount(t, "-t", "fuse.bucketfs", "-o", opts, testBucket, mnt); code != 0 {
		t.Fatalf("mount: exit %d: %s", code, out)
	}
	if !mounted(mnt) {
		t.Fatalf("mount returned 0 but %s is not mounted", mnt)
	}
	daemon := daemonFromLog(t, logFile)

	if got := readFile(t, filepath.Join(mnt, "seed.txt")); string(got) != "from the bucket" {
		t.Errorf("seed.txt reads %q", got)
	}
	data := testutil.RandomBytes(300<<10, 7)
	if err := os.WriteFile(filepath.Join(mnt, "written.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(mnt, "written.bin")); !bytes.Equal(got, data) {
		t.Errorf("written.bin reads back %d bytes, not what was written", len(got))
	}

	if code, out := runMount(t, "umount", mnt); code != 0 {
		t.Fatalf("umount: exit %d: %s", code, out)
	}
	type exit struct {
		st  *os.ProcessState
		err error
	}
	exited := make(chan exit, 1)
	go func() {
		st, err := daemon.Wait()
		exited <- exit{st, err}
	}()
	select {
	case e := <-exited:
		if e.err != nil || e.st.ExitCode() != 0 {
			t.Errorf("daemon exit after umount: %v, %v", e.st, e.err)
		}
	case <-time.After(60 * time.Second):
		daemon.Kill()
		<-exited
		t.Fatalf("daemon did not exit within 60s of umount")
	}
	if got := object(t, emu, "written.bin"); !bytes.Equal(got, data) {
		t.Errorf("bucket has %d bytes for written.bin after the daemon exited", len(got))
	}
}

// runMount runs mount (or the command given first if it is not a flag)
// with a deadline and returns its exit code and output.
func runMount(t *testing.T, args ...string) (int, string) {
	t.Helper()
	name := "mount"
	if !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %v: no exit within 90s: %s", name, args, out)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return 0, string(out)
}

// daemonFromLog finds the pid in the daemon's "mounted" line.
func daemonFromLog(t *testing.T, logFile string) *os.Process {
	t.Helper()
	log, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	ms := regexp.MustCompile(`msg=mounted .* pid=(\d+)`).FindAllSubmatch(log, -1)
	if len(ms) == 0 {
		t.Fatalf("no pid in the mount log:\n%s", log)
	}
	pid, _ := strconv.Atoi(string(ms[len(ms)-1][1]))
	p, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// bindDir shows a new directory holding links named as in links on top of
// dir, until the test ends.
func bindDir(t *testing.T, dir string, links map[string]string) {
	t.Helper()
	over := t.TempDir()
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(over, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount(over, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s on %s: %v", over, dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// runInMountNamespace runs test again, in a new process in a private mount
// namespace, and passes or fails with it.
func runInMountNamespace(t *testing.T, test string) {
	if os.Getuid() != 0 {
		t.Skip("needs root, for a mount namespace")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare (util-linux) not found")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, unshare, "--mount", "--propagation", "private", "--",
		os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1", "-test.timeout=4m")
	cmd.Env = append(os.Environ(), testBinEnv+"="+binPath, testMountNSEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+test)) {
		t.Fatalf("%s in a mount namespace: %v\n%s", test, err, out)
	}
	t.Logf("%s in a mount namespace:\n%s", test, out)
}

// Inside runInMountNamespace, make sure the namespace is not the host's
// before the test covers system directories.
func init() {
	if os.Getenv(testMountNSEnv) == "" {
		return
	}
	self, err1 := os.Readlink("/proc/self/ns/mnt")
	parent, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", os.Getppid()))
	if err1 != nil || err2 != nil || self == parent {
		fmt.Fprintln(os.Stderr, "refusing to run: not in a mount namespace of its own")
		os.Exit(1)
	}
}
