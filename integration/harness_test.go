package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/mountinfo"
	"github.com/bucketfs/bucketfs/internal/testutil/testemu"

	"github.com/bucketfs/bucketfs/internal/emulator"
)

// noRaceExitSleep makes every process the tests start inherit
// GORACE=atexit_sleep_ms=0 (added to what GORACE says, unless it names
// that option). Built with -race, bucketfs and this binary run as a
// helper (as another user) otherwise sleep 1 s when they exit, the race
// runtime's default, which added a second to every unmount, remount and
// helper step: about 100 s of TestModelRandomOps, 32 s of
// TestPOSIXUsers. Races are still reported, and fail the test through
// the exit status (66), whenever they happen while the process runs; the
// sleep only gave goroutines still running after main returned a second
// more to race (and bucketfs is to wait for its goroutines before it
// exits).
func noRaceExitSleep() {
	v := os.Getenv("GORACE")
	if strings.Contains(v, "atexit_sleep_ms=") {
		return
	}
	os.Setenv("GORACE", strings.TrimSpace(v+" atexit_sleep_ms=0"))
}

// binPath is the bucketfs binary built once for all tests.
var binPath string

func TestMain(m *testing.M) {
	noRaceExitSleep()
	if _, err := exec.LookPath("fusermount3"); err != nil {
		fmt.Fprintln(os.Stderr, "integration tests need fusermount3 (apt-get install fuse3)")
		os.Exit(1)
	}
	if bin := os.Getenv(testBinEnv); bin != "" {
		// A test run again by runInMountNamespace: the binary is built.
		binPath = bin
		os.Exit(m.Run())
	}
	sweepDeadMounts()
	dir, err := os.MkdirTemp("", "bucketfs-bin-")
	if err != nil {
		panic(err)
	}
	// Other users run the binary too (unprivileged mounts).
	if err := os.Chmod(dir, 0o755); err != nil {
		panic(err)
	}
	binPath = filepath.Join(dir, "bucketfs")
	// The test hooks (internal/testhook) are in: BUCKETFS_TEST_PAUSE
	// widens race windows for the tests that ask for it.
	args := []string{"build", "-tags", "bucketfs_testhooks", "-o", binPath}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../cmd/bucketfs")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building bucketfs:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const testBucket = "test-bucket"

// startEmulator starts an emulator with testBucket, on plain HTTP and on
// TLS (mountOpts.tls); it stops with the test.
//
// BUCKETFS_EMU_SEEDED=1 serves the bucket from the emulator's seeded
// store (emulator.Options.Seeded: the ordered index behind PutMany), a
// run of the suite against it.
func startEmulator(t testing.TB, wan *emulator.WANProfile) *emulator.Server {
	t.Helper()
	return testemu.Start(t, emulator.Options{Buckets: []string{testBucket}, WAN: wan, TLS: true,
		Seeded: os.Getenv("BUCKETFS_EMU_SEEDED") != ""})
}

// tlsArgs are the flags that mount emu over its TLS listener, trusting
// its certificate (written to a file of the test).
func tlsArgs(t testing.TB, emu *emulator.Server) []string {
	t.Helper()
	ca := filepath.Join(t.TempDir(), "emulator-ca.pem")
	if err := os.WriteFile(ca, emu.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"--endpoint", emu.TLSURL(), "--ca-file", ca}
}

// put stores data as object name, failing the test on error.
func put(t testing.TB, emu *emulator.Server, name string, data []byte) {
	t.Helper()
	testemu.Put(t, emu, testBucket, name, data)
}

func sum(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b)) }

// syncBuffer collects a child's stderr for the test log.
type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	grown chan struct{} // closed and replaced on every line
}

func (s *syncBuffer) add(line string) {
	s.mu.Lock()
	s.b.WriteString(line)
	s.b.WriteByte('\n')
	if s.grown != nil {
		close(s.grown)
	}
	s.grown = make(chan struct{})
	s.mu.Unlock()
}

// waitFor returns when a line containing sub has been logged, or fails
// the test after timeout.
func (s *syncBuffer) waitFor(t testing.TB, sub string, timeout time.Duration) {
	t.Helper()
	s.waitForSince(t, 0, sub, timeout)
}

// mark is where the log ends now, for waitForSince.
func (s *syncBuffer) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// waitForSince is waitFor for a line logged after mark: an earlier line
// of the same kind does not count.
func (s *syncBuffer) waitForSince(t testing.TB, mark int, sub string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		found := strings.Contains(s.b.String()[mark:], sub)
		if s.grown == nil {
			s.grown = make(chan struct{})
		}
		grown := s.grown
		s.mu.Unlock()
		if found {
			return
		}
		select {
		case <-grown:
		case <-deadline:
			t.Fatalf("the log did not say %q within %v:\n%s", sub, timeout, s.String())
		}
	}
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// mountProc is a running 'bucketfs mount' child process.
type mountProc struct {
	dir      string
	cacheDir string
	cmd      *exec.Cmd
	logs     *syncBuffer
	ready    chan struct{} // closed when the child logs that it mounted
	exited   chan struct{} // closed when the child has exited
	waitErr  error         // set before exited is closed
}

type mountOpts struct {
	cacheDir string   // "" for a new temporary one
	dir      string   // mountpoint; "" for a new temporary one
	args     []string // extra flags
	env      []string // extra environment
	uid      int      // run bucketfs as this user (and group); 0: as the test
	tls      bool     // reach the emulator over its TLS listener
	bin      string   // the bucketfs binary; "" for the suite's
}

// mount starts bucketfs on a new directory and waits until the mount is
// live. The mount is always taken down when the test ends, lazily if need
// be, even if the test failed.
func mount(t testing.TB, emu *emulator.Server, o mountOpts) *mountProc {
	t.Helper()
	m, err := startMount(t, emu, o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func startMount(t testing.TB, emu *emulator.Server, o mountOpts) (*mountProc, error) {
	t.Helper()
	m, err := spawnMount(t, emu, o)
	if err != nil {
		return nil, err
	}
	if err := m.waitReady(); err != nil {
		return nil, err
	}
	return m, nil
}

// spawnMount starts bucketfs without waiting for it to mount.
func spawnMount(t testing.TB, emu *emulator.Server, o mountOpts) (*mountProc, error) {
	t.Helper()
	if o.cacheDir == "" {
		o.cacheDir = t.TempDir()
	}
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	m := &mountProc{dir: o.dir, cacheDir: o.cacheDir, logs: &syncBuffer{},
		ready: make(chan struct{}), exited: make(chan struct{})}
	args := []string{"mount", testBucket, m.dir, "--endpoint", emu.URL(), "--anonymous", "--cache-dir", o.cacheDir}
	if o.tls {
		args = append(args, tlsArgs(t, emu)...) // the later --endpoint wins
	}
	// BUCKETFS_MOUNT_ARGS: flags for every mount of the run, before the
	// test's own (which win), e.g. --writeback-cache to run suites with it.
	args = append(args, strings.Fields(os.Getenv("BUCKETFS_MOUNT_ARGS"))...)
	args = append(args, o.args...)
	bin := binPath
	if o.bin != "" {
		bin = o.bin
	}
	m.cmd = exec.Command(bin, args...)
	m.cmd.Env = append(os.Environ(), o.env...)
	if o.uid != 0 {
		for _, d := range []string{m.dir, o.cacheDir} {
			if err := giveTo(d, o.uid); err != nil {
				return nil, err
			}
		}
		m.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(o.uid), Gid: uint32(o.uid)}}
	}
	stderr, err := m.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		m.stop()
		if t.Failed() {
			t.Logf("bucketfs log:\n%s", m.logs.String())
		}
	})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			m.logs.add(line)
			if strings.Contains(line, "msg=mounted") || strings.Contains(line, `"msg":"mounted"`) {
				once.Do(func() { close(m.ready) })
			}
		}
		m.waitErr = m.cmd.Wait()
		close(m.exited)
	}()
	return m, nil
}

// waitReady waits until the mount is live, or fails if the child exits
// first or does not mount within 60s.
func (m *mountProc) waitReady() error {
	select {
	case <-m.ready:
		return nil
	case <-m.exited:
		return fmt.Errorf("bucketfs exited before mounting (%v):\n%s", m.waitErr, m.logs.String())
	case <-time.After(60 * time.Second):
		return fmt.Errorf("bucketfs did not mount within 60s:\n%s", m.logs.String())
	}
}

// unmount stops the mount with SIGTERM and checks that it exits cleanly.
func (m *mountProc) unmount(t testing.TB) {
	t.Helper()
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal: %v", err)
	}
	select {
	case <-m.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("bucketfs did not exit within 60s of SIGTERM:\n%s", m.logs.String())
	}
	if m.waitErr != nil {
		t.Fatalf("bucketfs exited with %v:\n%s", m.waitErr, m.logs.String())
	}
	if mounted(m.dir) {
		t.Fatalf("%s is still mounted after bucketfs exited", m.dir)
	}
}

// crash kills the mount as a power cut or kill -9 would (SIGKILL, no
// flush) and clears the dead mount.
func (m *mountProc) crash(t testing.TB) {
	t.Helper()
	m.kill(t)
	if out, err := exec.Command("fusermount3", "-uz", m.dir).CombinedOutput(); err != nil && mounted(m.dir) {
		t.Fatalf("clearing the dead mount: %v: %s", err, out)
	}
}

// kill sends SIGKILL and waits for the process to end. A FUSE daemon
// killed while one of its own threads waits in the kernel for its own
// mount (go-fuse opens a file in the mount once it is up, its "poll
// hack") never ends: that thread waits, uninterruptibly, for an answer
// the dead serving threads will not give, and the process's /dev/fuse
// descriptor, which would abort the connection once closed, stays open.
// Then the connection is aborted by hand, as an administrator would
// (echo 1 > /sys/fs/fuse/connections/N/abort), and the test says so.
func (m *mountProc) kill(t testing.TB) {
	t.Helper()
	aborted, err := m.killAndWait()
	if aborted {
		t.Logf("bucketfs did not end 20s after SIGKILL (a thread waited on its own mount): its FUSE connection on %s was aborted", m.dir)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// killAndWait is kill without a test: it reports whether the connection
// had to be aborted, and an error if the process still did not end.
func (m *mountProc) killAndWait() (aborted bool, err error) {
	m.cmd.Process.Kill()
	select {
	case <-m.exited:
		return false, nil
	case <-time.After(20 * time.Second):
	}
	if err := abortFuseConnection(m.dir); err != nil {
		return true, fmt.Errorf("aborting the connection of a killed mount: %w", err)
	}
	select {
	case <-m.exited:
		return true, nil
	case <-time.After(20 * time.Second):
		return true, errors.New("bucketfs did not end after its FUSE connection was aborted")
	}
}

// abortFuseConnection aborts the FUSE connection of the mount on dir.
func abortFuseConnection(dir string) error {
	mt, ok, err := mountinfo.Lookup(dir)
	if err != nil || !ok {
		return fmt.Errorf("no mount on %s in the mount table (%v)", dir, err)
	}
	_, minor, _ := strings.Cut(mt.Dev, ":")
	const ctl = "/sys/fs/fuse/connections"
	if _, err := os.Stat(filepath.Join(ctl, minor)); err != nil {
		// fusectl is not mounted everywhere.
		if out, err := exec.Command("mount", "-t", "fusectl", "none", ctl).CombinedOutput(); err != nil {
			return fmt.Errorf("mounting fusectl: %v: %s", err, out)
		}
	}
	return os.WriteFile(filepath.Join(ctl, minor, "abort"), []byte("1"), 0o200)
}

// stop takes the mount down whatever state it is in.
func (m *mountProc) stop() {
	select {
	case <-m.exited:
	default:
		m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.exited:
		case <-time.After(30 * time.Second):
			m.killAndWait()
			exec.Command("fusermount3", "-uz", m.dir).Run()
		}
	}
	if mounted(m.dir) {
		exec.Command("fusermount3", "-uz", m.dir).Run()
	}
}

// sweepDeadMounts lazily unmounts the bucketfs mounts under the temporary
// directory whose process is gone (statfs answers ENOTCONN). A test binary
// killed by its -timeout runs no cleanup, and leaves such mounts behind:
// anything that walks the temporary directory later fails on them.
// Mounts that answer, or do not answer at once, belong to a run still
// going on and are left alone.
func sweepDeadMounts() {
	ms, err := mountinfo.Read()
	if err != nil {
		return
	}
	tmp := filepath.Clean(os.TempDir()) + "/"
	for _, m := range ms {
		mp := m.Point
		if m.FSType != "fuse.bucketfs" || !strings.HasPrefix(mp, tmp) {
			continue
		}
		dead := make(chan bool, 1)
		go func() {
			// statfs always goes to the file system (stat of the root
			// may be answered from the kernel's cache).
			var st syscall.Statfs_t
			dead <- syscall.Statfs(mp, &st) == syscall.ENOTCONN
		}()
		select {
		case d := <-dead:
			if !d {
				continue
			}
		case <-time.After(2 * time.Second): // a hung mount: not ours to judge
			continue
		}
		fmt.Fprintln(os.Stderr, "integration: unmounting a dead bucketfs mount (its process is gone):", mp)
		exec.Command("fusermount3", "-uz", mp).Run()
	}
}

// mounted reports whether dir is a mount point now.
func mounted(dir string) bool {
	_, ok, _ := mountinfo.Lookup(dir)
	return ok
}

// path returns the path of name inside the mount.
func (m *mountProc) path(name string) string { return filepath.Join(m.dir, name) }

// readFile reads a file through the mount with a deadline, so that a hung
// FUSE request fails the test instead of hanging it.
func readFile(t testing.TB, path string) []byte {
	t.Helper()
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, err := os.ReadFile(path)
		ch <- res{b, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("read %s: %v", path, r.err)
		}
		return r.b
	case <-time.After(2 * time.Minute):
		t.Fatalf("read %s: no answer within 2 minutes", path)
		return nil
	}
}

// runBucketfs runs the binary to its end and returns its exit code and
// output; for the error cases.
func runBucketfs(t testing.TB, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("bucketfs %v did not exit within 90s:\n%s", args, out.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}

// copyHash streams r through sha256.
func copyHash(r io.Reader) (string, int64, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	return fmt.Sprintf("%x", h.Sum(nil)), n, err
}

// giveTo makes dir belong to uid and its parent traversable, so that a
// mount run as uid can use it.
func giveTo(dir string, uid int) error {
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	return os.Chown(dir, uid, uid)
}

// TestSweepDeadMounts: a mount whose process was killed, as a test
// binary killed by its -timeout leaves its mounts, is cleared by the next
// run's sweep; a live mount beside it is left alone.
func TestSweepDeadMounts(t *testing.T) {
	emu := startEmulator(t, nil)
	live := mount(t, emu, mountOpts{})
	dead := mount(t, emu, mountOpts{})
	dead.kill(t)
	if !mounted(dead.dir) {
		t.Fatal("the killed mount is gone already: nothing to sweep")
	}
	sweepDeadMounts()
	if mounted(dead.dir) {
		t.Error("the dead mount is still there after the sweep")
	}
	if !mounted(live.dir) {
		t.Error("the sweep unmounted a live mount")
	}
	if _, err := os.ReadDir(live.dir); err != nil {
		t.Errorf("the live mount after the sweep: %v", err)
	}
}

// The harness's last resort for a killed mount that does not end
// (mountProc.kill): aborting its FUSE connection fails the requests that
// wait on it. Shown with a daemon that is stopped (SIGSTOP), so that a
// stat waits for an answer that cannot come.
func TestAbortFuseConnection(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{})
	if err := m.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer m.cmd.Process.Signal(syscall.SIGCONT)
	// The stop is asynchronous: wait until the kernel shows the process
	// stopped (state T), or a request could still be answered.
	stat := fmt.Sprintf("/proc/%d/stat", m.cmd.Process.Pid)
	pollUntil(t, 10*time.Second, "the daemon is stopped", func() bool {
		b, err := os.ReadFile(stat)
		if err != nil {
			return false
		}
		i := bytes.LastIndexByte(b, ')') // the state follows the command name
		return i >= 0 && i+2 < len(b) && b[i+2] == 'T'
	})
	done := make(chan error, 1)
	go func() {
		var st syscall.Statfs_t
		done <- syscall.Statfs(m.dir, &st) // statfs always goes to the daemon
	}()
	select {
	case err := <-done:
		t.Fatalf("statfs answered (%v) while the daemon was stopped", err)
	case <-time.After(200 * time.Millisecond): // it waits, as it must
	}
	if err := abortFuseConnection(m.dir); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("statfs succeeded on an aborted connection")
		}
		t.Logf("statfs after the abort: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("statfs still waits 20s after the connection was aborted")
	}
	m.cmd.Process.Signal(syscall.SIGCONT)
	m.kill(t)
	exec.Command("fusermount3", "-uz", m.dir).Run()
}
