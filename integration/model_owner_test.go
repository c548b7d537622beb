package integration

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"golang.org/x/sys/unix"
)

// The model tester's operations about owners (issue 17): chown of files,
// links and directories to several users, directories opened to everyone
// (sticky or setgid), files and directories made, written, removed and
// renamed by another user (nobody, in a child process), a chown followed
// at once by the rename of the file's directory, and a remount with an
// empty cache (so that the files are not cached). The mount runs with
// --allow-other so that the other user reaches it.

var modelOwnerOps = []modelOp{
	{"chown", 4}, {"chown-dir", 2}, {"open-dir", 2}, {"as-nobody", 8},
	{"chown-then-rename-dir", 3}, {"remount-fresh", 1},
}

// modelOwners are the owners the tester gives: root, nobody, another.
var modelOwners = []int{0, nobodyID, 1000}

// modelRun is what an operation of the tester may change besides the
// trees: the mount (remount-fresh makes a new one, with a new cache).
type modelRun struct {
	t        *testing.T
	emu      *emulator.Server
	m        *mountProc
	cacheDir string
	args     []string
}

// ownerStep does owner operation op on the reference ref and the mount.
// It returns what it did and each side's error; ok false if it did
// nothing (no name to work on).
func ownerStep(r *modelRun, st *modelState, rng *rand.Rand, op, ref string) (what string, refErr, mntErr error, ok bool) {
	both := func(f func(root string) error) { refErr, mntErr = f(ref), f(r.m.dir) }
	owner := func() (int, int) {
		return modelOwners[rng.IntN(len(modelOwners))], modelOwners[rng.IntN(len(modelOwners))]
	}
	switch op {
	case "chown", "chown-dir":
		p := st.pickFile(rng)
		if op == "chown-dir" {
			p = st.pickDir(rng)
		}
		if p == "" {
			return "", nil, nil, false // the root keeps no owner (docs/design.md, limits)
		}
		uid, gid := owner()
		what = fmt.Sprintf("%s %s %d:%d", op, p, uid, gid)
		both(func(root string) error { return os.Lchown(filepath.Join(root, p), uid, gid) })
	case "open-dir":
		p := st.pickDir(rng)
		if p == "" {
			return "", nil, nil, false
		}
		mode := []uint32{0o777, 0o1777, 0o2777, 0o3777}[rng.IntN(4)]
		what = fmt.Sprintf("chmod %s/ %o", p, mode)
		both(func(root string) error { return unix.Chmod(filepath.Join(root, p), mode) })
	case "as-nobody":
		args := nobodyArgs(st, rng)
		if args == nil {
			return "", nil, nil, false
		}
		what = "as nobody: " + strings.Join(args, " ")
		refErr, mntErr = asNobody(r.t, ref, args), asNobody(r.t, r.m.dir, args)
		if refErr == nil {
			nobodyDid(st, args)
		}
	case "chown-then-rename-dir":
		// The sequence of issue 17, item 6: an attribute change (a
		// metadata patch on its way) just before the file's directory
		// is renamed.
		p := st.pickRegular(rng)
		dir := filepath.Dir(p)
		to := st.newPath(rng)
		if p == "" || dir == "." || to == "" || strings.HasPrefix(to, dir+"/") || len(to)-len(dir)+st.longestUnder(dir)+1 > 1024 {
			return "", nil, nil, false
		}
		uid, gid := owner()
		what = fmt.Sprintf("chown %s %d:%d, then rename-dir %s %s", p, uid, gid, dir, to)
		both(func(root string) error {
			if err := os.Chown(filepath.Join(root, p), uid, gid); err != nil {
				return err
			}
			return os.Rename(filepath.Join(root, dir), filepath.Join(root, to))
		})
		if refErr == nil {
			st.moveDir(dir, to)
		}
	case "remount-fresh":
		// Everything reaches the bucket at the unmount; the new mount
		// has an empty cache, so that the next operations find files
		// not cached.
		what = "remount with an empty cache"
		r.m.unmount(r.t)
		if bad := r.raced(); bad != "" {
			r.t.Errorf("the mount logged %q with no other client (flushing at the unmount)", bad)
		}
		r.cacheDir = r.t.TempDir()
		r.m = mount(r.t, r.emu, mountOpts{cacheDir: r.cacheDir, dir: r.m.dir, args: r.args})
	default:
		r.t.Fatalf("unknown operation %q", op)
	}
	return what, refErr, mntErr, true
}

// raced says what the mount's log says of its own changes racing each
// other ("" if nothing): no other client writes to the bucket of the
// tester, so a copy's source can only change, or a patch be refused,
// through a bug (issue 17, item 6).
func (r *modelRun) raced() string {
	for _, bad := range []string{"changed in the bucket before the copy was made", "a renamed file is lost", "an attribute change (mode, owner or times) was not applied"} {
		if strings.Contains(r.m.logs.String(), bad) {
			return bad
		}
	}
	return ""
}

// nobodyArgs picks what nobody does: create (and write) a file, make a
// directory, delete or rename a name.
func nobodyArgs(st *modelState, rng *rand.Rand) []string {
	switch rng.IntN(5) {
	case 0, 1:
		p := st.newPath(rng)
		if st.links[p] {
			// A link or special file made there: writing through it
			// reaches what it stands for (a device node, which the
			// mount, nodev, does not open: docs/design.md, limits).
			return nil
		}
		return []string{"create", p, strconv.Itoa(1 + rng.IntN(5000)), strconv.FormatUint(rng.Uint64(), 10)}
	case 2:
		return []string{"mkdir", st.newPath(rng)}
	case 3:
		if p := st.pickFile(rng); p != "" {
			return []string{"unlink", p}
		}
	default:
		if p := st.pickFile(rng); p != "" {
			return []string{"rename", p, st.newPath(rng)}
		}
	}
	return nil
}

// nobodyDid records in the model what nobody did (it succeeded).
func nobodyDid(st *modelState, args []string) {
	switch args[0] {
	case "create":
		st.addFile(args[1])
	case "mkdir":
		st.dirs = append(st.dirs, args[1])
	case "unlink":
		st.removeFile(args[1])
	case "rename":
		if args[1] != args[2] {
			link := st.links[args[1]]
			st.removeFile(args[1])
			st.removeFile(args[2])
			st.addFile(args[2])
			if link {
				st.links[args[2]] = true
			}
		}
	}
}

// modelAsEnv makes the test binary do one step as nobody (see init).
const modelAsEnv = "BUCKETFS_MODEL_AS"

func init() {
	if os.Getenv(modelAsEnv) == "" {
		return
	}
	args := strings.Split(os.Getenv(modelAsEnv), "\x1f")
	// The errno's number: 0 for success, -1 for an error that is none.
	n := 0
	if err := nobodyDo(os.Getenv(modelAsEnv+"_ROOT"), args); err != nil {
		n = -1
		var e syscall.Errno
		if errors.As(err, &e) {
			n = int(e)
		}
	}
	os.Stdout.WriteString(strconv.Itoa(n))
	os.Exit(0)
}

// nobodyDo does step args under root.
func nobodyDo(root string, args []string) error {
	p := filepath.Join(root, args[1])
	switch args[0] {
	case "create":
		n, _ := strconv.Atoi(args[2])
		seed, _ := strconv.ParseUint(args[3], 10, 64)
		return os.WriteFile(p, testutil.RandomBytes(n, seed), 0o640)
	case "mkdir":
		return os.Mkdir(p, 0o750)
	case "unlink":
		return os.Remove(p)
	case "rename":
		return os.Rename(p, filepath.Join(root, args[2]))
	}
	return fmt.Errorf("unknown step %q", args[0])
}

// asNobody does step args under root as nobody, in a child process, and
// returns its outcome (nil, or the errno).
func asNobody(t *testing.T, root string, args []string) error {
	cmd := exec.Command(helperExe(t))
	cmd.Env = append(os.Environ(), modelAsEnv+"="+strings.Join(args, "\x1f"), modelAsEnv+"_ROOT="+root)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyID, Gid: nobodyID, Groups: []uint32{}}}
	cmd.WaitDelay = 10 * time.Second
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("running %q as nobody: %v", args, err)
	}
	n, err := strconv.Atoi(string(out))
	switch {
	case err != nil || n < 0:
		return fmt.Errorf("as nobody: %q", out)
	case n > 0:
		return syscall.Errno(n)
	}
	return nil
}
