package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
	"golang.org/x/sys/unix"
)

// The model-based random tester: a seeded random sequence of file system
// operations is applied to the mount and to a plain local directory (the
// reference). Every operation must give the same result (errno) on both;
// every few steps, and after every remount, the two trees must hold the
// same names and bytes; at the end, after the unmount's flush, the bucket
// must hold exactly the reference's files.
//
// make test runs 1500 steps, and 600 more in a bucket with a hierarchical
// namespace (where a directory with no local changes is renamed by the
// bucket); BUCKETFS_SEED=N replays a seed (the failing seed is printed,
// but uploads run in the background, so a replay takes the same steps and
// not always the same timing); BUCKETFS_LONG=1 runs more steps. Modes,
// symbolic links, special files and user.* attributes are compared too;
// left out, because the mount does not support them (docs/design.md,
// limits): hard links, exchanges with a directory, and times (a local
// directory's times move with every access).

// modelOp is one kind of operation; do applies it under root and returns
// its error, and describe says what it did, for the failure message.
type modelOp struct {
	name   string
	weight int
}

var modelOps = []modelOp{
	{"create", 20}, {"overwrite", 6}, {"pwrite", 10}, {"append", 6}, {"truncate", 6},
	{"rename", 10}, {"rename-over", 5}, {"unlink", 8}, {"mkdir", 6}, {"rmdir", 5},
	{"fsync", 3}, {"read", 8}, {"remount", 1},
	{"chmod", 4}, {"symlink", 3}, {"write-unlinked", 2}, {"rename-dir", 4},
	{"exchange", 3}, {"chmod-dir", 2},
	{"mknod", 3}, {"setxattr", 4}, {"removexattr", 2},
}

func init() { modelOps = append(modelOps, modelOwnerOps...) }

// modelState is what the test knows of the tree, kept in step with the
// reference directory: relative paths of directories ("" is the root)
// and files.
type modelState struct {
	dirs  []string
	files []string
	links map[string]bool // those of files that are symbolic links or special files: never written or read through
}

func (s *modelState) pickDir(rng *rand.Rand) string { return s.dirs[rng.IntN(len(s.dirs))] }

func (s *modelState) pickFile(rng *rand.Rand) string {
	if len(s.files) == 0 {
		return ""
	}
	return s.files[rng.IntN(len(s.files))]
}

// newPath returns a path for a new entry in a random directory. Paths
// stay within GCS's 1024 bytes for an object name (a directory's
// placeholder ends in '/'): the mount refuses longer ones with
// ENAMETOOLONG, which a local directory does not.
func (s *modelState) newPath(rng *rand.Rand) string {
	dir, name := s.pickDir(rng), modelName(rng)
	if len(dir)+1+len(name)+1 > 1024 {
		name = "s" + strconv.Itoa(rng.IntN(4))
	}
	if len(dir)+1+len(name)+1 > 1024 {
		dir = "" // too deep even for a short name
	}
	return filepath.Join(dir, name)
}

// pickRegular picks a file that is not a symbolic link ("" if none came
// up): writes through a link would reach whatever it points at.
func (s *modelState) pickRegular(rng *rand.Rand) string {
	if p := s.pickFile(rng); !s.links[p] {
		return p
	}
	return ""
}

func (s *modelState) removeFile(p string) {
	s.files = slices.DeleteFunc(s.files, func(f string) bool { return f == p })
	delete(s.links, p)
}

// moveDir renames directory from to to in the model: the directory and
// everything under it.
func (s *modelState) moveDir(from, to string) {
	move := func(p string) string {
		if p == from {
			return to
		}
		if rest, ok := strings.CutPrefix(p, from+"/"); ok {
			return to + "/" + rest
		}
		return p
	}
	s.dirs = slices.DeleteFunc(s.dirs, func(d string) bool { return d == to })
	for i, d := range s.dirs {
		s.dirs[i] = move(d)
	}
	links := map[string]bool{}
	for i, f := range s.files {
		s.files[i] = move(f)
		if s.links[f] {
			links[s.files[i]] = true
		}
	}
	s.links = links
}

// longestUnder is the length of the longest path under directory dir.
func (s *modelState) longestUnder(dir string) int {
	n := len(dir)
	for _, p := range append(slices.Clone(s.dirs), s.files...) {
		if strings.HasPrefix(p, dir+"/") {
			n = max(n, len(p))
		}
	}
	return n
}

func (s *modelState) addFile(p string) {
	if !slices.Contains(s.files, p) {
		s.files = append(s.files, p)
	}
}

// modelName returns a name for a new entry: mostly short ones (so that
// names collide), sometimes unicode or 255 bytes long.
func modelName(rng *rand.Rand) string {
	switch rng.IntN(20) {
	case 0:
		return "ünïcødé-" + strconv.Itoa(rng.IntN(5))
	case 1:
		return strings.Repeat("l", 250) + strconv.Itoa(10000 + rng.IntN(5))[:5]
	default:
		return string(rune('a'+rng.IntN(6))) + strconv.Itoa(rng.IntN(4))
	}
}

func TestModelRandomOps(t *testing.T) { runModel(t, false, 1500, 20000) }

func TestModelRandomOpsHierarchical(t *testing.T) { runModel(t, true, 600, 8000) }

// runModel runs the random tester for steps steps (long in long mode), in
// a flat bucket or a hierarchical one.
func runModel(t *testing.T, hierarchical bool, steps, long int) {
	if os.Getenv("BUCKETFS_LONG") != "" {
		steps = long
	}
	if v := os.Getenv("BUCKETFS_STEPS"); v != "" { // a replay that stops early
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("BUCKETFS_STEPS=%q: want a positive number", v)
		}
		steps = n
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("BUCKETFS_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("BUCKETFS_SEED=%q: %v", v, err)
		}
	}
	t.Logf("seed %d (replay with BUCKETFS_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 11))

	emu := startEmulator(t, nil)
	emu.SetHierarchical(testBucket, hierarchical)
	cacheDir := t.TempDir()
	ref := t.TempDir()
	delay := "20ms"
	if v := os.Getenv("BUCKETFS_MODEL_DELAY"); v != "" {
		delay = v // as fsstress found issue 17's race: 100ms
	}
	// --allow-other: another user works on the mount too (model_owner_test.go).
	args := []string{"--write-back-delay", delay, "--metadata-ttl", "1m", "--allow-other"}
	m := mount(t, emu, mountOpts{cacheDir: cacheDir, args: args})
	for _, d := range []string{ref, filepath.Dir(ref), m.dir, filepath.Dir(m.dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := &modelRun{t: t, emu: emu, args: args}
	st := &modelState{dirs: []string{""}, links: map[string]bool{}}
	var total int
	for _, op := range modelOps {
		total += op.weight
	}
	var history []string // the operations so far, for the failure message
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d; the last operations:\n%s", seed, strings.Join(history[max(0, len(history)-modelHistory()):], "\n"))
		}
	})
	fail := func(step int, what string, f string, a ...any) {
		t.Helper()
		t.Logf("the bucket holds: %q", listObjects(t, emu, ""))
		t.Fatalf("seed %d, step %d (%s): %s", seed, step, what, fmt.Sprintf(f, a...))
	}
	deadline, hasDeadline := t.Deadline()
	for step := range steps {
		if hasDeadline && time.Until(deadline) < 2*time.Minute {
			// Killed at the deadline, the binary would leave the mount
			// behind: stop while the cleanup still runs.
			t.Fatalf("seed %d: stopped at step %d of %d, the test's -timeout is near; give a longer one", seed, step, steps)
		}
		k := rng.IntN(total)
		var op string
		for _, o := range modelOps {
			if k < o.weight {
				op = o.name
				break
			}
			k -= o.weight
		}
		var what string
		var refErr, mntErr error
		both := func(f func(root string) error) {
			refErr, mntErr = f(ref), f(m.dir)
		}
		switch op {
		case "create", "overwrite":
			p := st.newPath(rng)
			if op == "overwrite" {
				if p = st.pickRegular(rng); p == "" {
					continue
				}
			}
			data := testutil.RandomBytes(modelSize(rng), rng.Uint64())
			what = fmt.Sprintf("%s %s (%d bytes)", op, p, len(data))
			if st.links[p] {
				continue // writing through a link would reach its target
			}
			both(func(root string) error { return os.WriteFile(filepath.Join(root, p), data, 0o644) })
			if refErr == nil {
				st.addFile(p)
			}
		case "pwrite", "append":
			p := st.pickRegular(rng)
			if p == "" {
				continue
			}
			data := testutil.RandomBytes(1+rng.IntN(20000), rng.Uint64())
			off := int64(rng.IntN(150000))
			flags := os.O_RDWR
			if op == "append" {
				flags |= os.O_APPEND
			}
			what = fmt.Sprintf("%s %s at %d (%d bytes)", op, p, off, len(data))
			both(func(root string) error {
				f, err := os.OpenFile(filepath.Join(root, p), flags, 0)
				if err != nil {
					return err
				}
				if op == "append" {
					_, err = f.Write(data)
				} else {
					_, err = f.WriteAt(data, off)
				}
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				return err
			})
		case "truncate":
			p := st.pickRegular(rng)
			if p == "" {
				continue
			}
			size := int64(rng.IntN(200000))
			what = fmt.Sprintf("truncate %s to %d", p, size)
			both(func(root string) error { return os.Truncate(filepath.Join(root, p), size) })
		case "rename", "rename-over":
			from := st.pickFile(rng)
			if from == "" {
				continue
			}
			to := st.newPath(rng)
			if op == "rename-over" {
				to = st.pickFile(rng)
			}
			what = fmt.Sprintf("rename %s %s", from, to)
			both(func(root string) error { return os.Rename(filepath.Join(root, from), filepath.Join(root, to)) })
			if refErr == nil && from != to {
				link := st.links[from]
				st.removeFile(from)
				st.removeFile(to)
				st.addFile(to)
				if link {
					st.links[to] = true
				}
			}
		case "exchange":
			// RENAME_EXCHANGE of two files (or links), or of a file and
			// a name that may not exist (ENOENT on both sides).
			a, b := st.pickFile(rng), st.pickFile(rng)
			if rng.IntN(4) == 0 {
				b = st.newPath(rng)
			}
			if a == "" || b == "" || slices.Contains(st.dirs, b) {
				continue // with a directory: EINVAL on the mount (docs/design.md, limits)
			}
			what = fmt.Sprintf("exchange %s %s", a, b)
			both(func(root string) error {
				return unix.Renameat2(unix.AT_FDCWD, filepath.Join(root, a), unix.AT_FDCWD, filepath.Join(root, b), unix.RENAME_EXCHANGE)
			})
			if refErr == nil {
				la, lb := st.links[a], st.links[b]
				delete(st.links, a)
				delete(st.links, b)
				if la {
					st.links[b] = true
				}
				if lb {
					st.links[a] = true
				}
			}
		case "rename-dir":
			from := st.pickDir(rng)
			if from == "" {
				continue
			}
			to := st.newPath(rng)
			if rng.IntN(3) == 0 {
				to = st.pickDir(rng) // over a directory: empty, not, or in the tree
			}
			// Within GCS's 1024-byte names (the mount refuses longer ones
			// with ENAMETOOLONG, a local directory does not).
			if to == "" || len(to)-len(from)+st.longestUnder(from)+1 > 1024 {
				continue
			}
			what = fmt.Sprintf("rename-dir %s %s", from, to)
			both(func(root string) error { return os.Rename(filepath.Join(root, from), filepath.Join(root, to)) })
			if refErr == nil && from != to {
				st.moveDir(from, to)
			}
		case "unlink":
			p := st.pickFile(rng)
			if p == "" {
				continue
			}
			what = "unlink " + p
			both(func(root string) error { return os.Remove(filepath.Join(root, p)) })
			if refErr == nil {
				st.removeFile(p)
			}
		case "mkdir":
			p := st.newPath(rng)
			what = "mkdir " + p
			both(func(root string) error { return os.Mkdir(filepath.Join(root, p), 0o755) })
			if refErr == nil {
				st.dirs = append(st.dirs, p)
			}
		case "rmdir":
			p := st.pickDir(rng)
			if p == "" {
				continue
			}
			what = "rmdir " + p
			both(func(root string) error { return syscall.Rmdir(filepath.Join(root, p)) })
			if refErr == nil {
				st.dirs = slices.DeleteFunc(st.dirs, func(d string) bool { return d == p })
			}
		case "fsync":
			p := st.pickRegular(rng)
			if p == "" {
				continue
			}
			what = "fsync " + p
			both(func(root string) error {
				f, err := os.OpenFile(filepath.Join(root, p), os.O_RDWR, 0)
				if err != nil {
					return err
				}
				err = f.Sync()
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				return err
			})
		case "read":
			p := st.pickRegular(rng)
			if p == "" {
				continue
			}
			what = "read " + p
			history = append(history, fmt.Sprintf("%d: %s", step, what))
			want, err := os.ReadFile(filepath.Join(ref, p))
			if err != nil {
				fail(step, what, "reference: %v", err)
			}
			got, err := os.ReadFile(filepath.Join(m.dir, p))
			if err != nil || !bytes.Equal(got, want) {
				fail(step, what, "the mount gives %d bytes (err %v), the reference %d; first difference at %d", len(got), err, len(want), firstDiff(got, want))
			}
			continue
		case "chmod":
			p := st.pickRegular(rng)
			if p == "" {
				continue
			}
			mode := []os.FileMode{0o600, 0o640, 0o644, 0o755, 0o700}[rng.IntN(5)]
			what = fmt.Sprintf("chmod %s %o", p, mode)
			both(func(root string) error { return os.Chmod(filepath.Join(root, p), mode) })
		case "chmod-dir":
			p := st.pickDir(rng)
			if p == "" {
				continue // the root keeps no mode (docs/design.md, limits)
			}
			// Modes that leave the owner every right: the test runs
			// as root, but a mode is a mode.
			mode := []os.FileMode{0o700, 0o750, 0o711, 0o755}[rng.IntN(4)]
			what = fmt.Sprintf("chmod %s/ %o", p, mode)
			both(func(root string) error { return os.Chmod(filepath.Join(root, p), mode) })
		case "symlink":
			p := st.newPath(rng)
			// No target outside the test's directories: a bug that turned
			// a file into a link would make the writes meant for the file
			// reach the target (it did, before it was found).
			target := []string{"a0", "../b1", "/nonexistent/bucketfs-model/" + modelName(rng), "no/such/" + modelName(rng)}[rng.IntN(4)]
			what = fmt.Sprintf("symlink %s -> %s", p, target)
			both(func(root string) error { return os.Symlink(target, filepath.Join(root, p)) })
			if refErr == nil {
				st.addFile(p)
				st.links[p] = true
			}
		case "write-unlinked":
			// A file deleted while open lives on for its descriptor.
			p := st.pickRegular(rng)
			if p == "" {
				continue
			}
			data := testutil.RandomBytes(1+rng.IntN(5000), rng.Uint64())
			what = fmt.Sprintf("write-unlinked %s (%d bytes)", p, len(data))
			var got [2][]byte
			i := 0
			both(func(root string) error {
				defer func() { i++ }()
				f, err := os.OpenFile(filepath.Join(root, p), os.O_RDWR, 0)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := os.Remove(filepath.Join(root, p)); err != nil {
					return err
				}
				if _, err := f.WriteAt(data, 100); err != nil {
					return err
				}
				b, err := io.ReadAll(f)
				got[i] = b
				return err
			})
			if refErr == nil {
				st.removeFile(p)
				if !bytes.Equal(got[0], got[1]) {
					history = append(history, fmt.Sprintf("%d: %s", step, what))
					fail(step, what, "reading the deleted file through its descriptor: the mount gives %d bytes, the reference %d; first difference at %d", len(got[1]), len(got[0]), firstDiff(got[1], got[0]))
				}
			}
		case "mknod", "setxattr", "removexattr":
			var made string
			if what, made = modelTypesOp(op, rng, st, both); what == "" {
				continue
			}
			if made != "" && refErr == nil {
				st.addFile(made)
				st.links[made] = true
			}
		case "remount":
			history = append(history, fmt.Sprintf("%d: remount", step))
			what = "remount"
			m.unmount(t)
			if run.m = m; run.raced() != "" {
				fail(step, what, "the mount logged %q with no other client", run.raced())
			}
			m = mount(t, emu, mountOpts{cacheDir: cacheDir, args: args})
			if d := compareTrees(t, ref, m.dir); d != "" {
				fail(step, what, "after the remount the mount and the reference differ:\n%s", d)
			}
			continue
		default:
			run.m, run.cacheDir = m, cacheDir
			var ok bool
			what, refErr, mntErr, ok = ownerStep(run, st, rng, op, ref)
			m, cacheDir = run.m, run.cacheDir
			if !ok {
				continue
			}
		}
		history = append(history, fmt.Sprintf("%d: %s -> %v", step, what, errno(refErr)))
		if errno(refErr) != errno(mntErr) {
			fail(step, what, "the reference says %v, the mount %v", refErr, mntErr)
		}
		if run.m = m; run.raced() != "" {
			fail(step, what, "the mount logged %q with no other client", run.raced())
		}
		if step%25 == 0 {
			if d := compareTrees(t, ref, m.dir); d != "" {
				fail(step, what, "the mount and the reference differ:\n%s", d)
			}
		}
	}
	if d := compareTrees(t, ref, m.dir); d != "" {
		fail(steps, "end", "the mount and the reference differ:\n%s", d)
	}
	m.unmount(t)
	if run.m = m; run.raced() != "" {
		fail(steps, "unmount", "the mount logged %q with no other client", run.raced())
	}
	compareBucket(t, seed, ref, listObjects(t, emu, ""), func(name string) ([]byte, map[string]string) {
		o, err := emu.Object(testBucket, name)
		if err != nil {
			return nil, nil
		}
		return o.Content, o.Metadata
	})
	t.Logf("%d steps, %d files and %d directories at the end, all alike on the mount, the reference and in the bucket", steps, len(st.files), len(st.dirs)-1)
	if hierarchical {
		// No folder left behind: those of the bucket are the reference's
		// directories.
		var dirs []string
		for _, d := range st.dirs[1:] {
			dirs = append(dirs, d+"/")
		}
		sort.Strings(dirs)
		if got := emu.Folders(testBucket); !slices.Equal(got, dirs) {
			t.Errorf("seed %d: the bucket's folders differ from the reference's directories:\n bucket: %q\n reference: %q", seed, got, dirs)
		}
		t.Logf("%d directory renames made by the bucket's folder rename; %d folders, no empty one left", emu.FolderRenames(), len(dirs))
	}
}

// modelHistory is how many operations a failure prints
// (BUCKETFS_HISTORY=N; 40 by default).
func modelHistory() int {
	if n, err := strconv.Atoi(os.Getenv("BUCKETFS_HISTORY")); err == nil && n > 0 {
		return n
	}
	return 40
}

// modelSize is a file size: mostly small, sometimes empty or a few
// hundred KiB.
func modelSize(rng *rand.Rand) int {
	switch rng.IntN(10) {
	case 0:
		return 0
	case 1:
		return 100000 + rng.IntN(300000)
	default:
		return rng.IntN(10000)
	}
}

// errno reduces an error to what the comparison cares about.
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO // not a system call error: compare as "failed"
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// treeEntry is one name of a tree: a directory (dir) or a file's sha256.
type treeEntry struct {
	dir     bool
	sum     string
	size    int64
	mode    fs.FileMode // permission bits (setuid, setgid and sticky included)
	link    string      // a symbolic link's target
	special string      // a special file's type and device (specialOf)
	xattrs  string      // user.* attributes (userXattrsOf)
	uid     uint32
	gid     uint32
}

// ownerOf is the owner and group of info.
func ownerOf(info fs.FileInfo) (uint32, uint32) {
	st := info.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid
}

// fullMode is info's permission bits with setuid, setgid and sticky.
func fullMode(info fs.FileInfo) fs.FileMode {
	return fs.FileMode(info.Sys().(*syscall.Stat_t).Mode & 0o7777)
}

// readTree walks root: relative path -> entry.
func readTree(t *testing.T, root string) map[string]treeEntry {
	t.Helper()
	out := map[string]treeEntry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		if d.IsDir() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			uid, gid := ownerOf(info)
			out[rel] = treeEntry{dir: true, mode: fullMode(info), uid: uid, gid: gid}
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			uid, gid := ownerOf(info)
			out[rel] = treeEntry{link: target, uid: uid, gid: gid}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.Type()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice) != 0 {
			sp, err := specialOf(p)
			uid, gid := ownerOf(info)
			out[rel] = treeEntry{special: sp, mode: info.Mode().Perm(), uid: uid, gid: gid}
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		sum, n, err := copyHash(f)
		if err != nil {
			return err
		}
		if st, err := f.Stat(); err != nil || st.Size() != n {
			return fmt.Errorf("%s: stat says %v bytes (err %v), reading gives %d", rel, st.Size(), err, n)
		}
		uid, gid := ownerOf(info)
		out[rel] = treeEntry{sum: sum, size: n, mode: fullMode(info), uid: uid, gid: gid}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	for rel, e := range out {
		if e.xattrs, err = userXattrsOf(filepath.Join(root, rel)); err != nil {
			t.Fatalf("reading the attributes of %s: %v", rel, err)
		}
		out[rel] = e
	}
	return out
}

// compareTrees describes how the mount's tree differs from the
// reference's ("" if it does not).
func compareTrees(t *testing.T, ref, mnt string) string {
	t.Helper()
	want, got := readTree(t, ref), readTree(t, mnt)
	var diffs []string
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: missing on the mount", p))
		case g != w:
			diffs = append(diffs, fmt.Sprintf("%s: mount %+v, reference %+v", p, g, w))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: on the mount only (%+v)", p, got[p]))
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs[:min(len(diffs), 20)], "\n")
}

// modeKept reports whether metadata md says mode: bucketfs-mode, or the
// mount's default def without it.
func modeKept(md map[string]string, mode, def fs.FileMode) bool {
	if v, ok := md["bucketfs-mode"]; ok {
		return v == strconv.FormatUint(uint64(mode), 8)
	}
	return mode == def
}

// ownerKept reports whether metadata md says w's owner and group (the
// mount's defaults, 0, without them).
func ownerKept(md map[string]string, w treeEntry) bool {
	id := func(key string) string {
		if v, ok := md[key]; ok {
			return v
		}
		return "0"
	}
	return id("bucketfs-uid") == strconv.FormatUint(uint64(w.uid), 10) && id("bucketfs-gid") == strconv.FormatUint(uint64(w.gid), 10)
}

// compareBucket fails unless the bucket holds exactly the reference's
// files (directories may have a placeholder object "dir/").
func compareBucket(t *testing.T, seed uint64, ref string, objects []string, read func(string) ([]byte, map[string]string)) {
	t.Helper()
	want := readTree(t, ref)
	var diffs []string
	seen := map[string]bool{}
	for _, name := range objects {
		seen[name] = true
		if strings.HasSuffix(name, "/") {
			w, ok := want[strings.TrimSuffix(name, "/")]
			if !ok || !w.dir {
				diffs = append(diffs, fmt.Sprintf("%s: a placeholder of a directory the reference does not have", name))
			} else if _, md := read(name); !modeKept(md, w.mode, 0o755) || !ownerKept(md, w) {
				diffs = append(diffs, fmt.Sprintf("%s: mode %o, owner %d:%d in the reference, the placeholder's metadata says %v", name, w.mode, w.uid, w.gid, md))
			} else if got := bucketXattrs(md); got != w.xattrs {
				diffs = append(diffs, fmt.Sprintf("%s: attributes %q in the reference, the placeholder's metadata has %q", name, w.xattrs, got))
			}
			continue
		}
		w, ok := want[name]
		if !ok || w.dir {
			diffs = append(diffs, fmt.Sprintf("%s: in the bucket, not a file of the reference", name))
			continue
		}
		content, md := read(name)
		if w.link != "" {
			if len(content) != 0 || md["gcsfuse_symlink_target"] != w.link || !ownerKept(md, w) {
				diffs = append(diffs, fmt.Sprintf("%s: a link to %q in the reference; the bucket has %d bytes, metadata %v", name, w.link, len(content), md))
			}
			continue
		}
		if w.special != "" {
			if d := specialKept(content, md, w.special); d != "" || !modeKept(md, w.mode, 0o644) {
				diffs = append(diffs, fmt.Sprintf("%s: %s (mode %o in the reference, %q in the bucket)", name, d, w.mode, md["bucketfs-mode"]))
			}
			continue
		}
		if got := bucketXattrs(md); got != w.xattrs {
			diffs = append(diffs, fmt.Sprintf("%s: attributes %q in the reference, the bucket's metadata has %q", name, w.xattrs, got))
		}
		sum, n, _ := copyHash(bytes.NewReader(content))
		if sum != w.sum || n != w.size {
			diffs = append(diffs, fmt.Sprintf("%s: the bucket has %d bytes, the reference %d (or other bytes)", name, n, w.size))
		}
		if !modeKept(md, w.mode, 0o644) || !ownerKept(md, w) {
			diffs = append(diffs, fmt.Sprintf("%s: mode %o, owner %d:%d in the reference, the bucket's metadata says %v", name, w.mode, w.uid, w.gid, md))
		}
	}
	for p, w := range want {
		switch {
		case !w.dir && !seen[p]:
			diffs = append(diffs, fmt.Sprintf("%s: missing in the bucket", p))
		case w.dir && !seen[p+"/"] && (w.mode != 0o755 || w.uid != 0 || w.gid != 0 || w.xattrs != ""):
			diffs = append(diffs, fmt.Sprintf("%s: a directory of mode %o, owner %d:%d (attributes %q) in the reference, with no placeholder to keep it", p, w.mode, w.uid, w.gid, w.xattrs))
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		t.Fatalf("seed %d, after the flush: the bucket and the reference differ:\n%s", seed, strings.Join(diffs[:min(len(diffs), 20)], "\n"))
	}
}
