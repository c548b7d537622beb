package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
)

// Real programs on the mount: git, sqlite3, tar and rsync do what
// applications do (lock files, renames over, fsync, mmap, chmod, utimes),
// and their own checks (git fsck, PRAGMA integrity_check, checksums of
// trees) say whether the data survived, on the mount and after a remount
// with a fresh cache (everything from the bucket).
//
// Each program is a chain of steps; a step that fails stops its chain
// (the rest is skipped), unless it is a check that nothing after it
// depends on. Steps are judged with knownDifferences like the POSIX
// cases: key "programs/PROGRAM/STEP".
//
// BUCKETFS_STRACE=1 runs every command under strace -f -Z (failed system
// calls only) and logs the tail of the trace when a command fails.

// programSteps are all the steps, so that knownDifferences can be checked
// for names that do not exist.
var programSteps = []string{
	"programs/git/init", "programs/git/commit", "programs/git/fsck", "programs/git/status-clean",
	"programs/git/clone-in-mount", "programs/git/clone-out", "programs/git/clone-into-mount",
	"programs/git/gc", "programs/git/fsck-after-remount", "programs/git/status-after-remount",
	"programs/sqlite3/rollback-journal", "programs/sqlite3/wal", "programs/sqlite3/integrity-after-remount",
	"programs/tar/extract-into-mount", "programs/tar/tree-in-mount", "programs/tar/create-from-mount",
	"programs/tar/tree-after-remount",
	"programs/rsync/copy-in", "programs/rsync/tree-in-mount", "programs/rsync/tree-while-uploading",
	"programs/rsync/second-run-copies-nothing",
	"programs/rsync/delete-and-update", "programs/rsync/copy-out", "programs/rsync/tree-after-remount",
}

// chain runs the steps of one program in order.
type chain struct {
	t       *testing.T
	program string
	failed  string // the first step that failed, if one did
}

// must runs a step the rest of the chain depends on.
func (c *chain) must(name string, f func() error) { c.run(name, true, f) }

// check runs a step nothing after it depends on.
func (c *chain) check(name string, f func() error) { c.run(name, false, f) }

func (c *chain) run(name string, breaks bool, f func() error) {
	key := "programs/" + c.program + "/" + name
	if !slices.Contains(programSteps, key) {
		c.t.Fatalf("step %s is missing from programSteps", key)
	}
	c.t.Run(c.program+"/"+name, func(t *testing.T) {
		if c.failed != "" {
			t.Skipf("skipped: step %s failed", c.failed)
		}
		err := f()
		diff := ""
		if err != nil {
			diff = err.Error()
			if breaks {
				c.failed = name
			}
		}
		judge(t, key, diff)
	})
}

// runner runs commands with a deadline and a private environment.
type runner struct {
	t   *testing.T
	ctx context.Context
	env []string
}

func newRunner(t *testing.T, ctx context.Context) *runner {
	home := t.TempDir()
	env := append(os.Environ(),
		"HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=bucketfs", "GIT_AUTHOR_EMAIL=test@bucketfs.invalid",
		"GIT_COMMITTER_NAME=bucketfs", "GIT_COMMITTER_EMAIL=test@bucketfs.invalid", "LC_ALL=C", "TZ=UTC")
	return &runner{t: t, ctx: ctx, env: env}
}

// run runs name with args in dir and returns its standard output; the
// error holds the exit status and the standard error.
func (r *runner) run(dir, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(r.ctx, 4*time.Minute)
	defer cancel()
	var trace string
	if os.Getenv("BUCKETFS_STRACE") != "" {
		trace = filepath.Join(r.t.TempDir(), "strace")
		args = append([]string{"-f", "-Z", "-qq", "-o", trace, name}, args...)
		name = "strace"
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, r.env
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("no end within the deadline (%w)", ctx.Err())
	}
	if err != nil {
		msg := fmt.Sprintf("%s %s: %v\nstderr:\n%s", name, strings.Join(args, " "), err, lastLines(stderr.String(), 30))
		if trace != "" {
			if b, rerr := os.ReadFile(trace); rerr == nil {
				msg += "\nfailed system calls (strace -Z), last ones:\n" + lastLines(string(b), 40)
			}
		}
		return stdout.String(), errors.New(msg)
	}
	return stdout.String(), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// sameTree describes how the trees under want and got differ, in names,
// bytes, and sizes that stat gives against sizes that reads give; nil if
// they do not.
func sameTree(want, got string) error {
	w, err := treeOf(want)
	if err != nil {
		return err
	}
	g, err := treeOf(got)
	if err != nil {
		return err
	}
	var diffs []string
	for p, we := range w {
		switch ge, ok := g[p]; {
		case !ok:
			diffs = append(diffs, p+": missing")
		case ge != we:
			diffs = append(diffs, fmt.Sprintf("%s: %+v, want %+v", p, ge, we))
		}
	}
	for p := range g {
		if _, ok := w[p]; !ok {
			diffs = append(diffs, p+": not in "+want)
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	slices.Sort(diffs)
	return fmt.Errorf("%s differs from %s in %d names:\n%s", got, want, len(diffs), strings.Join(diffs[:min(len(diffs), 10)], "\n"))
}

// treeEntry2 is a name of a tree as sameTree compares it.
type treeEntry2 struct {
	dir      bool
	sum      string
	statSize int64 // what fstat says after the read
	readSize int64 // what the read gave
}

// treeOf walks root: relative path -> entry.
func treeOf(root string) (map[string]treeEntry2, error) {
	out := map[string]treeEntry2{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		if d.IsDir() {
			out[rel] = treeEntry2{dir: true}
			return nil
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
		st, err := f.Stat()
		if err != nil {
			return err
		}
		out[rel] = treeEntry2{sum: sum, statSize: st.Size(), readSize: n}
		return nil
	})
	return out, err
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
}

// goSource is a real tree of a few hundred files: part of the Go source
// tree of the toolchain running the test.
func goSource(t *testing.T) string {
	src := t.TempDir()
	root := filepath.Join(runtime.GOROOT(), "src")
	for _, sub := range []string{"go", "compress"} {
		if err := copyTree(filepath.Join(root, sub), filepath.Join(src, sub)); err != nil {
			t.Fatalf("copying the Go source tree: %v", err)
		}
	}
	return src
}

func TestPrograms(t *testing.T) {
	for _, p := range []string{"git", "sqlite3", "tar", "rsync"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s is not installed (scripts/deps.sh installs it)", p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	withUmask(t, 0o022)
	r := newRunner(t, ctx)
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{})
	local := t.TempDir()
	src := goSource(t)

	// Everything runs once on the mount; then the mount is flushed,
	// mounted again with an empty cache, and checked again.
	git := &chain{t: t, program: "git"}
	gitRepo, gitClone := m.path("git/repo"), m.path("git/clone")
	var gitHead string
	gitHeadOf := func(dir string) (string, error) {
		out, err := r.run(dir, "git", "rev-parse", "HEAD")
		return strings.TrimSpace(out), err
	}
	sameHead := func(dir string) error {
		h, err := gitHeadOf(dir)
		if err != nil {
			return err
		}
		if h != gitHead {
			return fmt.Errorf("HEAD of %s is %s, want %s", dir, h, gitHead)
		}
		return nil
	}
	git.must("init", func() error {
		if err := os.MkdirAll(m.path("git"), 0o755); err != nil {
			return err
		}
		_, err := r.run(m.path("git"), "git", "init", "-q", "-b", "main", "repo")
		return err
	})
	git.must("commit", func() error {
		if err := copyTree(filepath.Join(src, "go", "ast"), filepath.Join(gitRepo, "ast")); err != nil {
			return err
		}
		if err := copyTree(filepath.Join(src, "compress", "flate"), filepath.Join(gitRepo, "flate")); err != nil {
			return err
		}
		for _, args := range [][]string{
			{"add", "-A"}, {"commit", "-q", "-m", "first"},
			{"mv", "ast/ast.go", "ast/moved.go"}, {"rm", "-q", "ast/walk.go"},
		} {
			if _, err := r.run(gitRepo, "git", args...); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(gitRepo, "flate", "deflate.go"), []byte("package flate\n// changed\n"), 0o644); err != nil {
			return err
		}
		if _, err := r.run(gitRepo, "git", "commit", "-q", "-a", "-m", "second"); err != nil {
			return err
		}
		var err error
		gitHead, err = gitHeadOf(gitRepo)
		return err
	})
	git.check("fsck", func() error {
		_, err := r.run(gitRepo, "git", "fsck", "--full", "--strict", "--no-progress")
		return err
	})
	statusClean := func(dir string) error {
		out, err := r.run(dir, "git", "status", "--porcelain")
		if err == nil && out != "" {
			err = fmt.Errorf("git status in %s is not clean:\n%s", dir, lastLines(out, 20))
		}
		return err
	}
	git.check("status-clean", func() error { return statusClean(gitRepo) })
	git.must("clone-in-mount", func() error {
		if _, err := r.run(m.path("git"), "git", "clone", "-q", gitRepo, gitClone); err != nil {
			return err
		}
		if _, err := r.run(gitClone, "git", "fsck", "--full", "--strict", "--no-progress"); err != nil {
			return err
		}
		if err := sameHead(gitClone); err != nil {
			return err
		}
		return sameTree(filepath.Join(gitRepo, "flate"), filepath.Join(gitClone, "flate"))
	})
	git.check("clone-out", func() error {
		out := filepath.Join(local, "git-out")
		if _, err := r.run(local, "git", "clone", "-q", gitRepo, out); err != nil {
			return err
		}
		if _, err := r.run(out, "git", "fsck", "--full", "--strict", "--no-progress"); err != nil {
			return err
		}
		if err := sameHead(out); err != nil {
			return err
		}
		return sameTree(filepath.Join(gitRepo, "ast"), filepath.Join(out, "ast"))
	})
	git.check("clone-into-mount", func() error {
		from := filepath.Join(local, "git-from")
		if _, err := r.run(local, "git", "clone", "-q", "--bare", gitRepo, from); err != nil {
			return err
		}
		into := m.path("git/from-local")
		if _, err := r.run(local, "git", "clone", "-q", from, into); err != nil {
			return err
		}
		if _, err := r.run(into, "git", "fsck", "--full", "--strict", "--no-progress"); err != nil {
			return err
		}
		return sameHead(into)
	})
	git.must("gc", func() error {
		if _, err := r.run(gitRepo, "git", "gc", "-q", "--aggressive", "--prune=now"); err != nil {
			return err
		}
		_, err := r.run(gitRepo, "git", "fsck", "--full", "--strict", "--no-progress")
		return err
	})

	// sqlite3: the same script on a local database and on the mount, the
	// same answers; 10,000 rows in 10 transactions, updates, deletes.
	sq := &chain{t: t, program: "sqlite3"}
	sqlScript := func(mode string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "PRAGMA journal_mode=%s;\nCREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, n INTEGER);\nCREATE INDEX t_n ON t(n);\n", mode)
		for i := range 10 {
			fmt.Fprintf(&b, "BEGIN;\nWITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 1000)\n"+
				"INSERT INTO t(v, n) SELECT printf('row-%%d-%%d-%%s', %d, x, hex(randomblob(20))), (x*7919+%d) %% 1000 FROM c;\nCOMMIT;\n", i, i)
		}
		b.WriteString("BEGIN; UPDATE t SET n = n + 1 WHERE id % 3 = 0; DELETE FROM t WHERE id % 10 = 0; COMMIT;\n")
		return b.String()
	}
	const sqlQuery = "PRAGMA integrity_check; SELECT count(*), sum(n), sum(length(v)), min(id), max(id) FROM t;"
	sqlAnswers := map[string]string{}
	sqlRun := func(db, mode string) (string, error) {
		if _, err := r.run(filepath.Dir(db), "sqlite3", "-batch", db, sqlScript(mode)); err != nil {
			return "", err
		}
		return r.run(filepath.Dir(db), "sqlite3", "-batch", db, sqlQuery)
	}
	for _, mode := range []string{"delete", "wal"} {
		step := map[string]string{"delete": "rollback-journal", "wal": "wal"}[mode]
		sq.check(step, func() error {
			want, err := sqlRun(filepath.Join(local, mode+".db"), mode)
			if err != nil {
				return fmt.Errorf("on the local directory: %w", err)
			}
			// 10,000 rows, every tenth deleted.
			if !strings.HasPrefix(want, "ok\n9000|") {
				return fmt.Errorf("local answer %q: the script is wrong", want)
			}
			if err := os.MkdirAll(m.path("sqlite"), 0o755); err != nil {
				return err
			}
			got, err := sqlRun(m.path("sqlite/"+mode+".db"), mode)
			if err != nil {
				return err
			}
			// The query does not depend on randomblob's bytes.
			if got != want {
				return fmt.Errorf("the mount answers %q, the local directory %q", got, want)
			}
			sqlAnswers[mode] = got
			return nil
		})
	}

	// tar: a real tree into the mount and out of it.
	tr := &chain{t: t, program: "tar"}
	tarFile := filepath.Join(local, "src.tar")
	if _, err := r.run(src, "tar", "-cf", tarFile, "go", "compress"); err != nil {
		t.Fatalf("tar of the local tree: %v", err)
	}
	tarDir := m.path("tar")
	tr.check("extract-into-mount", func() error {
		if err := os.Mkdir(tarDir, 0o755); err != nil {
			return err
		}
		_, err := r.run(tarDir, "tar", "-xf", tarFile)
		return err
	})
	tr.must("tree-in-mount", func() error { return sameTree(src, tarDir) })
	tr.check("create-from-mount", func() error {
		// Once the files are in the bucket: GNU tar fails ("file changed
		// as we read it") a file whose ctime changes while it reads it,
		// and the end of an upload changes a file's times (from the local
		// write's to the object's), which made this step fail by timing.
		if err := waitInBucket(t, emu, "tar/", countFiles(t, src)); err != nil {
			return err
		}
		out := filepath.Join(local, "tar-out")
		if err := os.Mkdir(out, 0o755); err != nil {
			return err
		}
		outTar := filepath.Join(local, "from-mount.tar")
		if _, err := r.run(tarDir, "tar", "-cf", outTar, "."); err != nil {
			return err
		}
		if _, err := r.run(out, "tar", "-xf", outTar); err != nil {
			return err
		}
		return sameTree(src, out)
	})

	// rsync -a in and out.
	rs := &chain{t: t, program: "rsync"}
	rsDir := m.path("rsync")
	rsSrc := filepath.Join(local, "rsync-src")
	if err := copyTree(src, rsSrc); err != nil {
		t.Fatal(err)
	}
	// Times far from the mount's own, so that a time the mount does not
	// keep cannot match by chance.
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := filepath.WalkDir(rsSrc, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, old, old)
	}); err != nil {
		t.Fatal(err)
	}
	rs.check("copy-in", func() error {
		_, err := r.run(local, "rsync", "-a", rsSrc+"/", rsDir+"/")
		return err
	})
	rs.must("tree-in-mount", func() error { return sameTree(rsSrc, rsDir) })
	// The files go to the bucket in the background (after
	// --write-back-delay): while they do, and once they are there, every
	// file must still show the size it reads as.
	rs.check("tree-while-uploading", func() error {
		files := countFiles(t, rsSrc)
		deadline := time.Now().Add(2 * time.Minute)
		for compares := 1; ; compares++ {
			if err := sameTree(rsSrc, rsDir); err != nil {
				return fmt.Errorf("compare %d, %d of %d files in the bucket: %w", compares, len(objectFiles(t, emu, "rsync/")), files, err)
			}
			if len(objectFiles(t, emu, "rsync/")) >= files {
				return sameTree(rsSrc, rsDir)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("after 2 minutes, %d of %d files in the bucket", len(objectFiles(t, emu, "rsync/")), files)
			}
		}
	})
	rs.check("second-run-copies-nothing", func() error {
		out, err := r.run(local, "rsync", "-a", "-i", rsSrc+"/", rsDir+"/")
		if out != "" {
			return fmt.Errorf("a second rsync -a found %d names to update (on a local directory: none), e.g.:\n%s\n(exit: %v)",
				strings.Count(out, "\n"), lastLines(out, 5), err)
		}
		return err
	})
	rs.must("delete-and-update", func() error {
		if err := os.RemoveAll(filepath.Join(rsSrc, "compress", "bzip2")); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(rsSrc, "go", "ast", "ast.go"), []byte("package ast\n"), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(rsSrc, "go", "new.go"), []byte("package go\n"), 0o644); err != nil {
			return err
		}
		if _, err := r.run(local, "rsync", "-a", "--delete", rsSrc+"/", rsDir+"/"); err != nil {
			// rsync reports failures to set attributes; the content is
			// what this step is about.
			t.Logf("rsync --delete: %v", err)
		}
		return sameTree(rsSrc, rsDir)
	})
	rs.check("copy-out", func() error {
		out := filepath.Join(local, "rsync-out")
		if _, err := r.run(local, "rsync", "-a", rsDir+"/", out+"/"); err != nil {
			return err
		}
		return sameTree(rsSrc, out)
	})

	// Remount with an empty cache: everything comes from the bucket.
	m.unmount(t)
	m = mount(t, emu, mountOpts{})
	gitRepo, gitClone = m.path("git/repo"), m.path("git/clone")
	git.check("fsck-after-remount", func() error {
		for _, dir := range []string{gitRepo, gitClone} {
			if _, err := r.run(dir, "git", "fsck", "--full", "--strict", "--no-progress"); err != nil {
				return err
			}
			if err := sameHead(dir); err != nil {
				return err
			}
		}
		return nil
	})
	git.check("status-after-remount", func() error {
		if err := statusClean(gitRepo); err != nil {
			return err
		}
		return statusClean(gitClone)
	})
	sq.check("integrity-after-remount", func() error {
		if len(sqlAnswers) == 0 {
			return errors.New("no database was written")
		}
		for mode, want := range sqlAnswers {
			got, err := r.run(m.path("sqlite"), "sqlite3", "-batch", m.path("sqlite/"+mode+".db"), sqlQuery)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("%s database after the remount answers %q, before %q", mode, got, want)
			}
		}
		return nil
	})
	tr.check("tree-after-remount", func() error { return sameTree(src, m.path("tar")) })
	rs.check("tree-after-remount", func() error { return sameTree(rsSrc, m.path("rsync")) })
	m.unmount(t)
}

// countFiles is the number of regular files under dir.
func countFiles(t *testing.T, dir string) int {
	tree, err := treeOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range tree {
		if !e.dir {
			n++
		}
	}
	return n
}

// objectFiles lists the objects under prefix that are files (not
// directory placeholders).
func objectFiles(t testing.TB, emu *emulator.Server, prefix string) []string {
	var out []string
	for _, o := range listObjects(t, emu, prefix) {
		if !strings.HasSuffix(o, "/") {
			out = append(out, o)
		}
	}
	return out
}

// waitInBucket polls until the bucket holds n files under prefix.
func waitInBucket(t *testing.T, emu *emulator.Server, prefix string, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for len(objectFiles(t, emu, prefix)) < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("after 2 minutes, %d of %d files under %s in the bucket", len(objectFiles(t, emu, prefix)), n, prefix)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
