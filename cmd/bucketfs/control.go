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
	"syscall"
	"time"

	"github.com/bucketfs/bucketfs/internal/control"
)

// 'bucketfs status MOUNTPOINT' and 'bucketfs flush MOUNTPOINT' talk to
// the running mount over its control socket (internal/control).

type controlConfig struct {
	mountpoint string
	cacheDir   string
	jsonOut    bool
	timeout    time.Duration
	maxDirty   int
}

const statusUsage = `Usage: bucketfs status MOUNTPOINT [--json] [--max-dirty N]
       bucketfs status --cache-dir DIR [--json]

Shows what the mount on MOUNTPOINT is doing: cache use, changes not yet in
the bucket (the oldest first), the upload queue, transfers in flight and
recent errors.

Flags:
`

const flushUsage = `Usage: bucketfs flush MOUNTPOINT [--timeout 10m]
       bucketfs flush --cache-dir DIR [--timeout 10m]

Uploads every change of the mount on MOUNTPOINT now, ignoring the
write-back delay, and waits until all are in the bucket, with progress on
stderr. Exits 0 when everything is in the bucket; 1, naming what is left,
if the timeout ends first (files still open for writing go up when they
are closed). The mount keeps running either way; Ctrl-C stops waiting.

Flags:
`

func parseControlArgs(cmd string, args []string) (*controlConfig, error) {
	c := &controlConfig{}
	fl := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	fl.StringVar(&c.cacheDir, "cache-dir", "", "the mount's cache directory, instead of MOUNTPOINT (for a mount whose record cannot be found)")
	usage := flushUsage
	if cmd == "status" {
		usage = statusUsage
		fl.BoolVar(&c.jsonOut, "json", false, "print the status as JSON")
		fl.IntVar(&c.maxDirty, "max-dirty", control.DefaultMaxDirty, "list at most this many dirty files")
	} else {
		fl.DurationVar(&c.timeout, "timeout", 10*time.Minute, "how long to wait for the uploads; 0 waits until done")
	}
	pos, err := parseInterspersed(fl, args, usage)
	if err != nil {
		return nil, err
	}
	switch {
	case len(pos) == 1:
		c.mountpoint = pos[0]
	case len(pos) == 0 && c.cacheDir != "":
	default:
		return nil, &usageError{fmt.Sprintf("%s takes MOUNTPOINT (or --cache-dir DIR), got %d arguments", cmd, len(pos))}
	}
	if c.timeout < 0 {
		return nil, &usageError{"--timeout must not be negative"}
	}
	return c, nil
}

// socketOf finds the control socket: in --cache-dir, or from the record
// the mount on the mountpoint wrote.
func (c *controlConfig) socketOf() (string, error) {
	return controlSocket(c.cacheDir, c.mountpoint)
}

// controlSocket finds a mount's control socket: in cacheDir if it is
// given, else from the record the mount on mountpoint wrote.
func controlSocket(cacheDir, mountpoint string) (string, error) {
	if cacheDir != "" {
		return filepath.Join(cacheDir, control.SocketName), nil
	}
	r, err := control.Lookup(mountpoint)
	if err != nil {
		return "", err
	}
	return r.Socket, nil
}

// parseInterspersed parses args with fl, flags and positional arguments
// in any order, and returns the positional ones. --help prints usage and
// fl's flags, and returns flag.ErrHelp; a bad flag is a usage error.
func parseInterspersed(fl *flag.FlagSet, args []string, usage string) ([]string, error) {
	var pos []string
	for {
		if err := fl.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				var b strings.Builder
				b.WriteString(usage)
				fl.VisitAll(func(f *flag.Flag) {
					fmt.Fprintf(&b, "  --%-12s %s", f.Name, f.Usage)
					if f.DefValue != "" && f.DefValue != "false" {
						fmt.Fprintf(&b, " (default %s)", f.DefValue)
					}
					b.WriteString("\n")
				})
				fmt.Print(b.String())
				return nil, flag.ErrHelp
			}
			return nil, &usageError{err.Error()}
		}
		if fl.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fl.Arg(0))
		args = fl.Args()[1:]
	}
}

func runStatus(args []string) error {
	c, err := parseControlArgs("status", args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	sock, err := c.socketOf()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := control.GetStatus(ctx, sock, c.maxDirty)
	if err != nil {
		return fmt.Errorf("asking the mount: %w", err)
	}
	if c.jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	printStatus(os.Stdout, st, time.Now())
	return nil
}

func printStatus(w io.Writer, st control.Status, now time.Time) {
	ago := func(t time.Time) string { return now.Sub(t).Round(time.Second).String() }
	fmt.Fprintf(w, "bucketfs %s, pid %d, up %s\n", st.Version, st.PID, ago(st.Started))
	fmt.Fprintf(w, "bucket:      gs://%s\n", st.Bucket)
	printBucketState(w, st, now) // offline.go
	printNotifyState(w, st, now) // announce.go
	if st.Flushing {
		fmt.Fprintf(w, "mountpoint:  %s (UNMOUNTED: sending the changes left before it exits)\n", st.Mountpoint)
	} else {
		fmt.Fprintf(w, "mountpoint:  %s\n", st.Mountpoint)
	}
	fmt.Fprintf(w, "cache dir:   %s\n", st.CacheDir)
	fmt.Fprintf(w, "cache:       %s of %s used, %d objects; %d hits, %d misses, %d uncached, %d evictions; %s read from the cache\n",
		humanSize(st.UsedBytes), humanSize(st.MaxBytes), st.Entries, st.Hits, st.Misses, st.Uncached, st.Evictions, humanSize(st.ReadBytes))
	if st.PinnedFiles > 0 {
		fmt.Fprintf(w, "pinned:      %d files (%s), kept from eviction ('bucketfs unpin')\n", st.PinnedFiles, humanSize(st.PinnedBytes))
	}
	fmt.Fprintf(w, "cache disk:  %s free, %s kept free (--cache-min-free)\n", humanSize(st.DiskFreeBytes), humanSize(st.MinFreeBytes))
	if st.DirtyFiles == 0 {
		fmt.Fprintf(w, "changes:     none waiting: everything is in the bucket\n")
	} else {
		fmt.Fprintf(w, "changes:     %d files (%s) not in the bucket yet, the oldest for %s\n",
			st.DirtyFiles, humanSize(st.DirtyBytes), ago(st.OldestDirty))
	}
	fmt.Fprintf(w, "queue:       %d waiting; %d uploaded, %d failed tries, %d conflicts\n",
		st.Queued, st.Uploads, st.UploadFailures, st.Conflicts)
	fmt.Fprintf(w, "in flight:   %d uploads, %d downloads, %d bucket requests\n",
		st.Uploading, st.Downloading, st.BucketRequests)
	if len(st.Dirty) > 0 {
		fmt.Fprintf(w, "not in the bucket yet (oldest first):\n")
		for _, d := range st.Dirty {
			note := ""
			switch {
			case d.Deleted && d.Uploading:
				note = "  (deletion, being sent)"
			case d.Deleted:
				note = "  (deletion)"
			case d.Uploading:
				note = "  (uploading)"
			}
			fmt.Fprintf(w, "  %8s  %10s  %s%s\n", ago(d.Since), humanSize(d.Size), d.Name, note)
		}
		if st.DirtyFiles > len(st.Dirty) {
			fmt.Fprintf(w, "  ... and %d more\n", st.DirtyFiles-len(st.Dirty))
		}
	}
	if len(st.Held) > 0 {
		fmt.Fprintf(w, "HELD (failed a checksum check, or refused by the bucket as invalid; not uploaded, not removed; see 'bucketfs resolve --help'):\n")
		for _, h := range st.Held {
			fmt.Fprintf(w, "  %s: %s\n", h.Name, h.Why)
		}
	}
	if len(st.Refused) > 0 {
		fmt.Fprintf(w, "REFUSED (the bucket refused the upload: fix the permission, credentials or bucket; tried again every 5 minutes):\n")
		for _, r := range st.Refused {
			fmt.Fprintf(w, "  %s  %s: %s\n", ago(r.Since), r.Name, r.Why)
		}
	}
	if st.ChecksumMismatches > 0 {
		fmt.Fprintf(w, "checks:      %d cached copies or downloads failed a checksum check since the start\n", st.ChecksumMismatches)
	}
	if len(st.Errors) > 0 {
		fmt.Fprintf(w, "recent errors:\n")
		for _, e := range st.Errors {
			fmt.Fprintf(w, "  %s  %-8s %s: %s\n", e.Time.Local().Format(time.DateTime), e.Op, e.Object, e.Err)
		}
	}
}

func runFlush(args []string) error {
	c, err := parseControlArgs("flush", args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	sock, err := c.socketOf()
	if err != nil {
		return err
	}
	// Ctrl-C stops waiting (the mount stops this flush, nothing else).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var last time.Time
	var lastP control.Progress
	left, err := control.Flush(ctx, sock, c.timeout, func(p control.Progress) {
		lastP = p
		if time.Since(last) >= time.Second || p.Files == 0 {
			last = time.Now()
			fmt.Fprintf(os.Stderr, "flushing: %d files (%s) left\n", p.Files, humanSize(p.Bytes))
		}
	})
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("stopped waiting; %d files (%s) were still to go (the mount keeps uploading them)", lastP.Files, humanSize(lastP.Bytes))
	}
	if err != nil {
		return fmt.Errorf("asking the mount: %w", err)
	}
	if len(left) > 0 {
		return fmt.Errorf("flush did not finish: %d files are not in the bucket yet (held, refused by the bucket, or still going when the timeout of %s ended; see 'bucketfs status'): %s",
			len(left), c.timeout, strings.Join(left, ", "))
	}
	fmt.Println("flushed: every change is in the bucket")
	return nil
}

// humanSize writes n bytes for people: "550 B", "1.5 MiB".
func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}

const resolveUsage = `Usage: bucketfs resolve MOUNTPOINT FILE (--keep-local | --take-bucket)
       bucketfs resolve --cache-dir DIR FILE (--keep-local | --take-bucket)

Ends the hold on FILE, a changed file whose cached copy failed its checksum
check: bytes it did not write differ from those of the version they came
from (a damaged cache disk). A held file is neither uploaded nor removed,
and answers EIO; 'bucketfs status' lists it under HELD. FILE is its path
under MOUNTPOINT (or its object name).

  --keep-local   the local bytes, as they are, become the file; they are
                 uploaded like any change
  --take-bucket  the bucket's version becomes the file again; the local
                 bytes are kept in DIR/lost+found (the path is printed)
`

// runResolve is 'bucketfs resolve'.
func runResolve(args []string) error {
	var keep, take bool
	var cacheDir string
	var pos []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-h" || a == "--help" || a == "-help":
			fmt.Print(resolveUsage)
			return nil
		case a == "--keep-local":
			keep = true
		case a == "--take-bucket":
			take = true
		case a == "--cache-dir" && i+1 < len(args):
			cacheDir = args[i+1]
			i++
		case strings.HasPrefix(a, "--cache-dir="):
			cacheDir = strings.TrimPrefix(a, "--cache-dir=")
		case strings.HasPrefix(a, "-"):
			return &usageError{fmt.Sprintf("resolve: unknown flag %s", a)}
		default:
			pos = append(pos, a)
		}
	}
	want := 2
	if cacheDir != "" {
		want = 1
	}
	switch {
	case keep == take:
		return &usageError{"resolve: say --keep-local or --take-bucket"}
	case len(pos) != want:
		return &usageError{fmt.Sprintf("resolve takes MOUNTPOINT FILE (or --cache-dir DIR FILE), got %d arguments", len(pos))}
	}
	c := &controlConfig{cacheDir: cacheDir}
	file := pos[len(pos)-1]
	if cacheDir == "" {
		c.mountpoint = pos[0]
		file = objectUnder(pos[0], file)
	}
	sock, err := c.socketOf()
	if err != nil {
		return err
	}
	saved, err := control.Resolve(context.Background(), sock, file, keep)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", file, err)
	}
	if keep {
		fmt.Printf("%s keeps its local bytes; they are uploaded\n", file)
	} else {
		fmt.Printf("%s shows the bucket's version again; the local bytes are in %s\n", file, saved)
	}
	return nil
}

// objectUnder turns a path under mountpoint into its object name; a name
// that is not such a path is taken as an object name.
func objectUnder(mountpoint, file string) string {
	mnt, err1 := filepath.Abs(mountpoint)
	abs, err2 := filepath.Abs(file)
	if err1 == nil && err2 == nil {
		if rel, err := filepath.Rel(mnt, abs); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			return filepath.ToSlash(rel)
		}
	}
	return strings.TrimPrefix(file, "/")
}
