package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Each bad start must exit non-zero with a message that says what is
// wrong, and leave nothing mounted.
func TestMountErrors(t *testing.T) {
	emu := startEmulator(t, nil)
	emu.CreateBucket("forbidden-bucket")
	emu.Fault("forbidden-bucket", 403)
	emu.CreateBucket("unauthorized-bucket")
	emu.Fault("unauthorized-bucket", 401)

	notAFile := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notAFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	emptyPath := t.TempDir() // a PATH without fusermount3

	cases := []struct {
		name     string
		bucket   string
		mnt      string // "" for a fresh directory
		args     []string
		env      []string
		code     int
		contains string
	}{
		{name: "bucket does not exist", bucket: "no-such-bucket", code: 1, contains: "bucket gs://no-such-bucket at " + emu.URL() + " does not exist"},
		{name: "credentials refused (403)", bucket: "forbidden-bucket", code: 1, contains: "denied (HTTP 403)"},
		{name: "credentials refused (401)", bucket: "unauthorized-bucket", code: 1, contains: "missing or refused (HTTP 401)"},
		{name: "credentials missing", bucket: testBucket, args: []string{"--anonymous=false"},
			env:  []string{"GOOGLE_APPLICATION_CREDENTIALS=" + filepath.Join(t.TempDir(), "missing.json"), "HOME=" + t.TempDir()},
			code: 1, contains: "credentials missing or not accepted"},
		{name: "mountpoint missing", bucket: testBucket, mnt: filepath.Join(t.TempDir(), "nope"), code: 1, contains: "does not exist: create it"},
		{name: "mountpoint is a file", bucket: testBucket, mnt: notAFile, code: 1, contains: "is not a directory"},
		{name: "fuse3 not installed", bucket: testBucket, env: []string{"PATH=" + emptyPath}, code: 1, contains: "fusermount3 not found in PATH"},
		{name: "cache dir not usable", bucket: testBucket, args: []string{"--cache-dir", filepath.Join(notAFile, "cache")}, code: 1, contains: "cache dir " + filepath.Join(notAFile, "cache") + " is not usable"},
		{name: "bad size flag", bucket: testBucket, args: []string{"--cache-max-size", "lots"}, code: 2, contains: `invalid size "lots"`},
		{name: "bad mode flag", bucket: testBucket, args: []string{"--file-mode", "999"}, code: 2, contains: `invalid mode "999"`},
		{name: "unknown flag", bucket: testBucket, args: []string{"--no-such-flag"}, code: 2, contains: "flag provided but not defined: -no-such-flag"},
		{name: "bad bucket name", bucket: "Bad_Bucket!", code: 2, contains: "invalid bucket name"},
		{name: "unreachable endpoint", bucket: testBucket, args: []string{"--endpoint", "http://127.0.0.1:1", "--check-timeout", "3s"}, code: 1, contains: "127.0.0.1:1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mnt := c.mnt
			if mnt == "" {
				mnt = t.TempDir()
			}
			args := []string{"mount", c.bucket, mnt, "--endpoint", emu.URL(), "--anonymous", "--cache-dir", t.TempDir()}
			args = append(args, c.args...) // later flags win
			code, out := runBucketfs(t, c.env, args...)
			if code != c.code {
				t.Errorf("exit code %d, want %d; output:\n%s", code, c.code, out)
			}
			if !strings.Contains(out, c.contains) {
				t.Errorf("output does not say %q:\n%s", c.contains, out)
			}
			if mounted(mnt) {
				exec.Command("fusermount3", "-uz", mnt).Run()
				t.Errorf("%s was left mounted", mnt)
			}
		})
	}
}

func TestMountpointBusyAndCacheDirInUse(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{})

	code, out := runBucketfs(t, nil, "mount", testBucket, m.dir, "--endpoint", emu.URL(), "--anonymous", "--cache-dir", t.TempDir())
	if code != 1 || !strings.Contains(out, "is busy: something is already mounted there") {
		t.Errorf("second mount on a busy mountpoint: exit %d, output:\n%s", code, out)
	}

	other := t.TempDir()
	code, out = runBucketfs(t, nil, "mount", testBucket, other, "--endpoint", emu.URL(), "--anonymous", "--cache-dir", m.cacheDir)
	// It names the holder, before asking the bucket (held.go).
	if code != 1 || !strings.Contains(out, "is in use by bucketfs pid") || !strings.Contains(out, "mounted on "+m.dir) {
		t.Errorf("second mount sharing a cache dir: exit %d, output:\n%s", code, out)
	}
	if mounted(other) {
		exec.Command("fusermount3", "-uz", other).Run()
		t.Errorf("%s was left mounted", other)
	}
	// The first mount is unharmed.
	if _, err := os.ReadDir(m.dir); err != nil {
		t.Errorf("first mount broken: %v", err)
	}
}

func TestCacheDirOfAnotherBucketIsRefused(t *testing.T) {
	emu := startEmulator(t, nil)
	emu.CreateBucket("other-bucket")
	m := mount(t, emu, mountOpts{})
	m.unmount(t)
	code, out := runBucketfs(t, nil, "mount", "other-bucket", t.TempDir(), "--endpoint", emu.URL(), "--anonymous", "--cache-dir", m.cacheDir)
	if code != 1 || !strings.Contains(out, `cache dir holds bucket "test-bucket", not "other-bucket"`) {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
}

func TestHelpAndVersion(t *testing.T) {
	code, out := runBucketfs(t, nil, "mount", "--help")
	if code != 0 || !strings.Contains(out, "--prefetch-parallelism") || !strings.Contains(out, "(default 16)") {
		t.Errorf("mount --help: exit %d:\n%s", code, out)
	}
	code, out = runBucketfs(t, nil, "version")
	if code != 0 || !strings.HasPrefix(out, "bucketfs ") {
		t.Errorf("version: exit %d: %q", code, out)
	}
	code, out = runBucketfs(t, nil, "frobnicate")
	if code != 2 || !strings.Contains(out, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d: %q", code, out)
	}
}

// A cache dir on a read-only filesystem (root ignores permission bits, so
// a read-only mount is how to make a directory unwritable for it).
func TestCacheDirReadOnly(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to mount a read-only tmpfs")
	}
	emu := startEmulator(t, nil)
	ro := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", ro).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a read-only tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", ro).Run() })
	mnt := t.TempDir()
	code, out := runBucketfs(t, nil, "mount", testBucket, mnt, "--endpoint", emu.URL(), "--anonymous", "--cache-dir", ro)
	if code != 1 || !strings.Contains(out, "cache dir "+ro+" is not usable") || !strings.Contains(out, "read-only file system") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
	if mounted(mnt) {
		exec.Command("fusermount3", "-uz", mnt).Run()
		t.Errorf("%s was left mounted", mnt)
	}
}
