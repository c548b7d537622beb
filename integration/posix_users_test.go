package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The POSIX suite's cases about users (issue 17): ownership of what a
// user makes, and the permission rules of a local disk. The mount runs
// with --allow-other (as root), so that other users reach it; each case
// runs its steps as root (setup) and as a user (in a child process with
// that user's credentials), in a local directory and on the mount, and
// the two observations must be equal, as in TestPOSIX. Every case runs
// once with the user being root and once being nobody (65534), and
// records owners and modes as numbers, so that an owner taken from the
// wrong place shows.

// userCase is one case: setup runs in the test process (as root) under
// root, the directory of the case; as runs as the user.
type userCase struct {
	name  string
	setup func(root string)
	as    func(o *obs, root string)
}

const nobodyID = 65534

// userHelperEnv makes the test binary run one userCase's as (see init).
const userHelperEnv = "BUCKETFS_POSIX_USER_CASE"

func init() {
	name := os.Getenv(userHelperEnv)
	if name == "" {
		return
	}
	for _, c := range userCases {
		if c.name == name {
			o := &obs{}
			o.add("as uid %d gid %d", os.Getuid(), os.Getgid())
			c.as(o, os.Getenv(userHelperEnv+"_ROOT"))
			os.Stdout.WriteString(o.String() + "\n")
			os.Exit(0)
		}
	}
	os.Stdout.WriteString("no such case " + name + "\n")
	os.Exit(2)
}

// helperExe is a copy of the test binary that other users may run (the
// build's own directory is root's alone), beside the bucketfs binary
// (TestMain removes both).
func helperExe(t *testing.T) string {
	helperOnce.Do(func() {
		exe, err := os.Executable()
		if err != nil {
			helperErr = err
			return
		}
		b, err := os.ReadFile(exe)
		if err != nil {
			helperErr = err
			return
		}
		helperPath = filepath.Join(filepath.Dir(binPath), "integration.test")
		helperErr = os.WriteFile(helperPath, b, 0o755)
	})
	if helperErr != nil {
		t.Fatalf("copying the test binary for other users: %v", helperErr)
	}
	return helperPath
}

var (
	helperOnce sync.Once
	helperPath string
	helperErr  error
)

// runAs runs case c's steps as uid (and gid uid, with no other group)
// under root, in a child process, and returns what it saw.
func runAs(t *testing.T, c userCase, uid int, root string) []string {
	cmd := exec.Command(helperExe(t))
	cmd.Env = append(os.Environ(), userHelperEnv+"="+c.name, userHelperEnv+"_ROOT="+root)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	cmd.WaitDelay = 10 * time.Second
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("running %s as uid %d: %v: %s", c.name, uid, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if want := fmt.Sprintf("as uid %d gid %d", uid, uid); lines[0] != want {
		t.Fatalf("the helper says %q, want %q", lines[0], want)
	}
	return lines
}

// owner records the owner, group and permission bits of path (lstat).
func (o *obs) owner(what, path string) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		o.err(what, err)
		return
	}
	o.add("%s: %d:%d %04o", what, st.Uid, st.Gid, st.Mode&0o7777)
}

// mtime records the modification time of path (lstat) in seconds, or
// "now" if it is within a minute of now.
func (o *obs) mtime(what, path string) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		o.err(what, err)
		return
	}
	t := time.Unix(st.Mtim.Unix())
	if time.Since(t).Abs() < time.Minute {
		o.add("%s: now", what)
		return
	}
	o.add("%s: %d", what, t.Unix())
}

var y2001 = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC).Unix()

// mustDo runs a setup step; a setup failure is the test's, not the
// mount's (setup runs as root on both).
func mustDo(err error) {
	if err != nil {
		panic(err)
	}
}

var userCases = []userCase{
	{"users/create-own", func(root string) {
		mustDo(os.Chmod(root, 0o777))
	}, func(o *obs, root string) {
		fd := o.open("create", pj(root, "f"), unix.O_CREAT|unix.O_WRONLY, 0o640)
		o.write("write", fd, []byte("mine"))
		o.close("close", fd)
		o.owner("file", pj(root, "f"))
		o.err("mkdir", unix.Mkdir(pj(root, "d"), 0o750))
		o.owner("dir", pj(root, "d"))
		o.err("symlink", unix.Symlink("f", pj(root, "l")))
		o.owner("link", pj(root, "l"))
		o.err("chmod own file", unix.Chmod(pj(root, "f"), 0o600))
		o.owner("file after chmod", pj(root, "f"))
		o.err("utimes own file", unix.UtimesNano(pj(root, "f"), []unix.Timespec{unix.NsecToTimespec(y2001 * 1e9), unix.NsecToTimespec(y2001 * 1e9)}))
		o.mtime("mtime", pj(root, "f"))
		o.file("reopen own file", pj(root, "f"))
		o.err("chmod own dir", unix.Chmod(pj(root, "d"), 0o700))
		o.owner("dir after chmod", pj(root, "d"))
		o.err("create in own dir", unix.Mkdir(pj(root, "d", "sub"), 0o755))
		o.owner("sub", pj(root, "d", "sub"))
	}},
	{"users/mode-zero", func(root string) {
		mustDo(os.Chmod(root, 0o777))
	}, func(o *obs, root string) {
		fd := o.open("create mode 0", pj(root, "f"), unix.O_CREAT|unix.O_WRONLY, 0)
		o.write("write through the creating fd", fd, []byte("x"))
		o.close("close", fd)
		o.owner("file", pj(root, "f"))
		o.err("mkdir mode 0", unix.Mkdir(pj(root, "d"), 0))
		o.owner("dir", pj(root, "d"))
		o.file("reopen", pj(root, "f"))
	}},
	{"users/setgid-dir", func(root string) {
		mustDo(os.Chmod(root, 0o777))
		mustDo(os.Mkdir(pj(root, "g"), 0o777))
		mustDo(os.Chown(pj(root, "g"), 0, 4242))
		mustDo(os.Chmod(pj(root, "g"), 0o2777))
	}, func(o *obs, root string) {
		o.owner("setgid dir", pj(root, "g"))
		fd := o.open("create in it", pj(root, "g", "f"), unix.O_CREAT|unix.O_WRONLY, 0o644)
		o.close("close", fd)
		o.owner("file", pj(root, "g", "f"))
		o.err("mkdir in it", unix.Mkdir(pj(root, "g", "d"), 0o755))
		o.owner("dir", pj(root, "g", "d"))
		o.err("symlink in it", unix.Symlink("x", pj(root, "g", "l")))
		o.owner("link", pj(root, "g", "l"))
		fd = o.open("create in the new dir", pj(root, "g", "d", "f"), unix.O_CREAT|unix.O_WRONLY, 0o2755)
		o.close("close", fd)
		o.owner("file in the new dir", pj(root, "g", "d", "f"))
	}},
	{"users/chown-rules", func(root string) {
		mustDo(os.Chmod(root, 0o777))
		mustDo(os.WriteFile(pj(root, "root-file"), []byte("r"), 0o666))
	}, func(o *obs, root string) {
		o.mkfile(pj(root, "f"), []byte("x"))
		uid, gid := os.Getuid(), os.Getgid()
		o.err("chown own file to self", unix.Chown(pj(root, "f"), uid, gid))
		o.err("chown own file to 1234", unix.Chown(pj(root, "f"), 1234, -1))
		o.err("chgrp own file to 4321", unix.Chown(pj(root, "f"), -1, 4321))
		o.owner("file", pj(root, "f"))
		o.err("chown root's file to self", unix.Chown(pj(root, "root-file"), uid, -1))
		o.err("chmod root's file", unix.Chmod(pj(root, "root-file"), 0o600))
		o.owner("root's file", pj(root, "root-file"))
		o.err("utimes root's file (explicit)", unix.UtimesNano(pj(root, "root-file"), []unix.Timespec{unix.NsecToTimespec(y2001 * 1e9), unix.NsecToTimespec(y2001 * 1e9)}))
		o.err("utimes root's file (now, writable)", unix.UtimesNano(pj(root, "root-file"), nil))
		o.mtime("root's file mtime", pj(root, "root-file"))
	}},
	{"users/setuid-cleared", func(root string) {
		mustDo(os.Chmod(root, 0o777))
	}, func(o *obs, root string) {
		o.mkfile(pj(root, "f"), []byte("x"))
		o.err("chmod 6755", unix.Chmod(pj(root, "f"), 0o6755))
		o.owner("before", pj(root, "f"))
		fd := o.open("open", pj(root, "f"), unix.O_WRONLY, 0)
		o.pwrite("write", fd, []byte("y"), 1)
		o.close("close", fd)
		o.owner("after a write", pj(root, "f"))
		o.err("chmod 6755", unix.Chmod(pj(root, "f"), 0o6755))
		o.err("truncate", unix.Truncate(pj(root, "f"), 1))
		o.owner("after a truncate", pj(root, "f"))
		o.err("chmod 6755", unix.Chmod(pj(root, "f"), 0o6755))
		o.err("chown to self", unix.Chown(pj(root, "f"), os.Getuid(), os.Getgid()))
		o.owner("after a chown", pj(root, "f"))
	}},
	{"users/sticky", func(root string) {
		mustDo(os.Chmod(root, 0o777))
		mustDo(os.Mkdir(pj(root, "t"), 0o777))
		mustDo(os.Chmod(pj(root, "t"), 0o1777))
		mustDo(os.WriteFile(pj(root, "t", "roots"), []byte("r"), 0o666))
		mustDo(os.WriteFile(pj(root, "t", "roots2"), []byte("r"), 0o666))
	}, func(o *obs, root string) {
		o.mkfile(pj(root, "t", "mine"), []byte("m"))
		o.err("unlink root's file", unix.Unlink(pj(root, "t", "roots")))
		o.err("rename root's file", unix.Rename(pj(root, "t", "roots2"), pj(root, "t", "x")))
		o.err("rename own file", unix.Rename(pj(root, "t", "mine"), pj(root, "t", "mine2")))
		o.err("rename own file over root's", unix.Rename(pj(root, "t", "mine2"), pj(root, "t", "roots")))
		o.ls("dir", pj(root, "t"))
		o.err("unlink own file", unix.Unlink(pj(root, "t", "mine2")))
		o.ls("dir", pj(root, "t"))
	}},
	{"users/utimensat", func(root string) {
		mustDo(os.Chmod(root, 0o777))
	}, func(o *obs, root string) {
		o.mkfile(pj(root, "f"), []byte("x"))
		old := unix.NsecToTimespec(y2001 * 1e9)
		o.err("set both", unix.UtimesNanoAt(unix.AT_FDCWD, pj(root, "f"), []unix.Timespec{old, old}, 0))
		o.mtime("mtime", pj(root, "f"))
		o.err("mtime UTIME_OMIT", unix.UtimesNanoAt(unix.AT_FDCWD, pj(root, "f"), []unix.Timespec{{Sec: 0, Nsec: unix.UTIME_NOW}, {Sec: 0, Nsec: unix.UTIME_OMIT}}, 0))
		o.mtime("mtime kept", pj(root, "f"))
		o.err("mtime UTIME_NOW", unix.UtimesNanoAt(unix.AT_FDCWD, pj(root, "f"), []unix.Timespec{{Sec: 0, Nsec: unix.UTIME_OMIT}, {Sec: 0, Nsec: unix.UTIME_NOW}}, 0))
		o.mtime("mtime now", pj(root, "f"))
	}},
	{"users/symlink-owner-times", func(root string) {
		mustDo(os.Chmod(root, 0o777))
	}, func(o *obs, root string) {
		o.mkfile(pj(root, "f"), []byte("x"))
		o.err("symlink", unix.Symlink("f", pj(root, "l")))
		old := unix.NsecToTimespec(y2001 * 1e9)
		o.err("lutimes", unix.UtimesNanoAt(unix.AT_FDCWD, pj(root, "l"), []unix.Timespec{old, old}, unix.AT_SYMLINK_NOFOLLOW))
		o.mtime("link mtime", pj(root, "l"))
		o.mtime("target mtime", pj(root, "f"))
		o.err("lchown to self", unix.Lchown(pj(root, "l"), os.Getuid(), os.Getgid()))
		o.err("lchown to 1234", unix.Lchown(pj(root, "l"), 1234, 4321))
		o.owner("link", pj(root, "l"))
		o.owner("target", pj(root, "f"))
	}},
}

func TestPOSIXUsers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run steps as another user")
	}
	withUmask(t, 0o022)
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: []string{"--allow-other"}})
	local := t.TempDir()
	for _, d := range []string{local, filepath.Dir(local), m.dir, filepath.Dir(m.dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range userCases {
		for _, uid := range []int{0, nobodyID} {
			name := c.name + "/uid-" + strconv.Itoa(uid)
			t.Run(name, func(t *testing.T) {
				requireLive(t, m)
				dir := caseDir(name)
				lr, mr := filepath.Join(local, dir), m.path(dir)
				for _, r := range []string{lr, mr} {
					if err := os.Mkdir(r, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				c.setup(lr)
				withWatchdog(t, m, posixCaseTimeout, func() int { c.setup(mr); return 0 })
				want := &obs{lines: runAs(t, c, uid, lr)}
				got := withWatchdog(t, m, posixCaseTimeout, func() *obs { return &obs{lines: runAs(t, c, uid, mr)} })
				judge(t, name, diffObs(want, got))
			})
		}
	}
	requireLive(t, m)
	// Owners and modes are kept: after a remount with an empty cache,
	// everything the cases made shows them as before.
	want := ownerTree(t, local)
	m.unmount(t)
	m = mount(t, emu, mountOpts{dir: m.dir, args: []string{"--allow-other"}})
	if d := diffObs(want, ownerTree(t, m.dir)); d != "" {
		t.Errorf("after a remount with an empty cache, owners and modes differ from the local directory's:\n%s", d)
	}
	m.unmount(t)
}

// ownerTree records the owner, group and mode of every name under root.
func ownerTree(t *testing.T, root string) *obs {
	o := &obs{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel != "." {
			o.owner(rel, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return o
}
