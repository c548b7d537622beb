package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bucketfs/bucketfs/cache"
	"github.com/bucketfs/bucketfs/internal/control"
	"github.com/bucketfs/bucketfs/internal/mountinfo"
	"golang.org/x/sys/unix"
)

// 'bucketfs warm PATH...' and 'bucketfs unpin PATH...': the paths are in
// a running mount; the command finds the mount they are in, walks them
// through it (so that the file tree learns their names and attributes:
// reading them afterwards asks the bucket nothing while those are
// trusted), then asks the mount's daemon over the control socket to
// fetch every object under them (cache/warm.go).

const warmUsage = `Usage: bucketfs warm PATH... [--pin] [--parallelism N] [--json]
       bucketfs warm --cache-dir DIR OBJECT-PREFIX... [flags]

Fills the cache of the running mount that PATH is in with every file under
PATH, many at a time, so that reading them later needs no network. Checks
first that they fit in the cache (beside changed and pinned files) and
fetches nothing if not. Files already cached are not fetched again, so a
warm that was stopped can be run again. Each download is checked like any
other (chunk and object checksums).

Exits 0 when every file is in the cache, 1 naming the ones that are not.

Flags:
`

const unpinUsage = `Usage: bucketfs unpin PATH...
       bucketfs unpin --cache-dir DIR OBJECT-PREFIX...

Ends the pins that 'bucketfs warm --pin' put on the files under PATH: they
stay cached, and may be evicted like any cached file again.
`

type warmConfig struct {
	cacheDir    string
	paths       []string
	pin         bool
	jsonOut     bool
	parallelism int
}

func parseWarmArgs(cmd string, args []string) (*warmConfig, error) {
	c := &warmConfig{}
	fl := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	fl.StringVar(&c.cacheDir, "cache-dir", "", "the mount's cache directory; the arguments are then object names or prefixes")
	usage := unpinUsage
	if cmd == "warm" {
		usage = warmUsage
		fl.BoolVar(&c.pin, "pin", false, "keep the files from eviction until 'bucketfs unpin' (they count against --cache-max-size)")
		fl.BoolVar(&c.jsonOut, "json", false, "print the result as one JSON object, and no progress")
		fl.IntVar(&c.parallelism, "parallelism", cache.DefaultWarmParallelism, "files fetched at once (bounded by the mount's --max-requests)")
	}
	paths, err := parseInterspersed(fl, args, usage)
	if err != nil {
		return nil, err
	}
	c.paths = paths
	switch {
	case len(c.paths) == 0:
		return nil, &usageError{cmd + " takes one PATH or more"}
	case cmd == "warm" && (c.parallelism < 1 || c.parallelism > 1024):
		return nil, &usageError{fmt.Sprintf("--parallelism must be between 1 and 1024, got %d", c.parallelism)}
	}
	return c, nil
}

// target is where the paths lead: the mount's socket and the object
// prefixes, with the directories to walk.
type target struct {
	socket   string
	prefixes []string
	walk     []string
}

// resolve finds the mount the paths are in (one mount for all) and their
// object names. A warm's paths must exist; an unpin's need not (the
// object of a pinned copy may be gone from the bucket, and its name from
// the mount, while the copy stays pinned).
func (c *warmConfig) resolve(mustExist bool) (target, error) {
	var t target
	if c.cacheDir != "" {
		for _, p := range c.paths {
			t.prefixes = append(t.prefixes, strings.Trim(p, "/"))
		}
		var err error
		t.socket, err = controlSocket(c.cacheDir, "")
		return t, err
	}
	mnt := ""
	for _, p := range c.paths {
		abs, err := realPath(p)
		if err != nil {
			return t, err
		}
		if mustExist {
			if _, err := os.Lstat(abs); errors.Is(err, os.ErrNotExist) {
				return t, fmt.Errorf("%s does not exist", abs)
			} else if err != nil {
				return t, err
			}
		}
		m, err := mountAt(abs)
		if err != nil {
			// A symbolic link from outside into a mount: followed.
			real, rerr := filepath.EvalSymlinks(abs)
			if rerr != nil || real == abs {
				return t, err
			}
			if m, err = mountAt(real); err != nil {
				return t, err
			}
			abs = real
		}
		if mnt != "" && m != mnt {
			return t, &usageError{fmt.Sprintf("the paths are in two mounts (%s and %s): run one warm per mount", mnt, m)}
		}
		mnt = m
		rel, _ := filepath.Rel(m, abs) // abs is under m (mountAt)
		if rel == "." {
			rel = ""
		}
		t.prefixes = append(t.prefixes, filepath.ToSlash(rel))
		t.walk = append(t.walk, abs)
	}
	var err error
	t.socket, err = controlSocket("", mnt)
	return t, err
}

// realPath is p, absolute, with the symbolic links of the directories it
// goes through resolved (the mount table names mountpoints so); its last
// element is kept as is (a link in the mount is an object). The part of
// p that does not exist is kept as written.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	dir, rest := filepath.Dir(abs), filepath.Base(abs)
	if abs == "/" {
		return abs, nil
	}
	for {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest), nil
		}
		if dir == "/" {
			return abs, nil
		}
		dir, rest = filepath.Dir(dir), filepath.Join(filepath.Base(dir), rest)
	}
}

// mountAt returns the bucketfs mountpoint that path is in.
func mountAt(path string) (string, error) {
	ms, err := mountinfo.Read()
	if err != nil {
		return "", err
	}
	best := mountinfo.Mount{}
	for _, m := range ms {
		if (path == m.Point || strings.HasPrefix(path, strings.TrimSuffix(m.Point, "/")+"/")) && len(m.Point) >= len(best.Point) {
			best = m
		}
	}
	if best.FSType != "fuse.bucketfs" {
		return "", fmt.Errorf("%s is not in a bucketfs mount (it is in %s, %s)", path, best.Point, best.FSType)
	}
	return best.Point, nil
}

// walkDirs reads every directory under roots through the mount, 16 at a
// time, so that the file tree learns the names and attributes before the
// files are read. An unreadable directory is skipped: the warm lists the
// bucket itself. It ends early when ctx does (Ctrl-C), once the
// directories being read are. A root that is a symbolic link is not
// followed (its object is the link).
func walkDirs(ctx context.Context, roots []string) {
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var visit func(dir string)
	visit = func(dir string) {
		defer wg.Done()
		sem <- struct{}{}
		if ctx.Err() != nil {
			<-sem
			return
		}
		ents, err := os.ReadDir(dir)
		<-sem
		if err != nil {
			return
		}
		for _, e := range ents {
			if e.IsDir() {
				wg.Add(1)
				go visit(filepath.Join(dir, e.Name()))
			}
		}
	}
	for _, r := range roots {
		if st, err := os.Lstat(r); err == nil && st.IsDir() {
			wg.Add(1)
			go visit(r)
		}
	}
	wg.Wait()
}

func runWarm(args []string) error {
	c, err := parseWarmArgs("warm", args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	t, err := c.resolve(true)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	walkDirs(ctx, t.walk)
	stopped := errors.New("stopped; what was fetched stays cached: run it again to go on")
	if ctx.Err() != nil {
		return stopped
	}
	term := !c.jsonOut && isTerminal(os.Stderr)
	r, err := control.Warm(ctx, t.socket, t.prefixes, c.parallelism, c.pin, func(p control.WarmProgress) {
		if term {
			fmt.Fprintf(os.Stderr, "\r\033[K%s", progressLine(p, time.Since(start)))
		}
	})
	if term {
		fmt.Fprint(os.Stderr, "\r\033[K")
	}
	if errors.Is(err, context.Canceled) {
		return stopped
	}
	if err != nil {
		return fmt.Errorf("warming: %w", err)
	}
	return reportWarm(os.Stdout, c, r, time.Since(start))
}

// progressLine is "1203/2002 files, 45.0 MiB of 160.0 MiB, 120.3 MiB/s, 1s left".
func progressLine(p control.WarmProgress, took time.Duration) string {
	rate := float64(p.Bytes-p.AlreadyBytes) / max(took.Seconds(), 0.001)
	left := "?"
	if rate > 0 {
		left = (time.Duration(float64(p.TotalBytes-p.Bytes)/rate*float64(time.Second)) + time.Second - 1).Truncate(time.Second).String()
	}
	return fmt.Sprintf("warming: %d/%d files, %s of %s, %s/s, %s left",
		p.Files, p.TotalFiles, humanSize(p.Bytes), humanSize(p.TotalBytes), humanSize(int64(rate)), left)
}

// warmResult is what --json prints.
type warmResult struct {
	control.WarmReport
	Pinned  bool    `json:"pinned"`
	Seconds float64 `json:"seconds"`
}

// reportWarm prints the result and returns an error unless every file
// was warmed.
func reportWarm(w io.Writer, c *warmConfig, r control.WarmReport, took time.Duration) error {
	if c.jsonOut {
		enc := json.NewEncoder(w)
		if err := enc.Encode(warmResult{WarmReport: r, Pinned: c.pin, Seconds: took.Seconds()}); err != nil {
			return err
		}
	} else {
		pinned := ""
		if c.pin {
			pinned = ", pinned"
		}
		fmt.Fprintf(w, "warmed %d of %d files (%s) in %s%s: %d fetched (%s), %d already cached (%s)\n",
			r.Files-r.Failed, r.TotalFiles, humanSize(r.TotalBytes), took.Round(time.Millisecond), pinned,
			r.Files-r.Failed-r.AlreadyFiles, humanSize(r.Bytes-r.AlreadyBytes-r.FailedBytes), r.AlreadyFiles, humanSize(r.AlreadyBytes))
		for _, e := range r.Errors {
			fmt.Fprintf(w, "  failed: %s: %s\n", e.Object, e.Err)
		}
		if more := r.Failed - len(r.Errors); more > 0 {
			fmt.Fprintf(w, "  ... and %d more failed\n", more)
		}
	}
	if r.Failed > 0 || r.Files < r.TotalFiles { // failures, or the mount stopped it (unmounting)
		return fmt.Errorf("%d of %d files were not warmed", r.TotalFiles-(r.Files-r.Failed), r.TotalFiles)
	}
	return nil
}

func runUnpin(args []string) error {
	c, err := parseWarmArgs("unpin", args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	t, err := c.resolve(false)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := control.Unpin(ctx, t.socket, t.prefixes)
	if err != nil {
		return fmt.Errorf("unpinning: %w", err)
	}
	fmt.Printf("unpinned %d files (%s)\n", u.Files, humanSize(u.Bytes))
	return nil
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// warmHandler is the control socket's warm: the cache's.
func warmHandler(ch *cache.Cache) control.WarmFunc {
	return func(ctx context.Context, prefixes []string, par int, pin bool, progress func(control.WarmProgress)) (control.WarmReport, error) {
		return ch.Warm(ctx, prefixes, cache.WarmOptions{Parallelism: par, Pin: pin}, progress)
	}
}
