package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bucketfs/bucketfs/internal/mountinfo"
)

// probeTimeout bounds how long a start waits for the file system on its
// mountpoint to answer statfs. A mount whose daemon died in its first
// moments may keep requests waiting for a short while (the kernel holds
// them until the INIT reply, which now never comes, or until the last
// holder of the /dev/fuse descriptor, such as fusermount3 passing it on,
// lets go); a live but hung daemon never answers.
const probeTimeout = 5 * time.Second

// errNoAnswer is the outcome of a probe that got no answer in time.
var errNoAnswer = errors.New("no answer")

// probeMount asks the file system mounted on dir for statfs, and returns
// its error (nil: it answered; syscall.ENOTCONN: its daemon is gone;
// errNoAnswer: no answer within probeTimeout). statfs, not stat: the
// kernel answers stat of a FUSE root from its attribute cache (for
// --metadata-ttl after the daemon last answered), even when the daemon is
// dead, while statfs always goes to the daemon.
func probeMount(dir string) error {
	silentMu.Lock()
	silent := silentMounts[dir]
	silentMu.Unlock()
	if silent {
		return errNoAnswer // its first statfs still waits: no second wait
	}
	done := make(chan error, 1)
	// This goroutine has no owner that waits for it when the daemon never
	// answers: no call can take back a request from a hung FUSE mount.
	// The start fails then (the mountpoint is busy) and the process ends.
	go func() {
		var st syscall.Statfs_t
		done <- syscall.Statfs(dir, &st)
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(probeTimeout):
		silentMu.Lock()
		silentMounts[dir] = true
		silentMu.Unlock()
		return errNoAnswer
	}
}

// silentMounts are the mountpoints whose probe got no answer.
var (
	silentMu     sync.Mutex
	silentMounts = map[string]bool{}
)

// clearDeadMount detaches the dead mounts of the same bucket that a
// bucketfs which stopped without unmounting (kill -9, OOM, a crash, even
// in its first moments) left on mp, so that the next start (systemd's
// Restart=on-failure, a mount from fstab) can mount again. A live mount,
// or a dead mount of anything else, is left alone, for checkMountpoint to
// report. Mounts may be stacked: each dead one on top is detached in turn.
func clearDeadMount(mp, bucket string, log *slog.Logger) {
	abs, err := mountpointPath(mp)
	if err != nil {
		return
	}
	for range 16 {
		m, ok, _ := mountinfo.Lookup(abs)
		if !ok || m.FSType != "fuse.bucketfs" || m.Source != "bucketfs:"+bucket {
			return
		}
		if err := probeMount(abs); !errors.Is(err, syscall.ENOTCONN) {
			return
		}
		out, err := exec.Command("fusermount3", "-uz", abs).CombinedOutput()
		if err != nil {
			log.Warn("cannot detach the dead mount a previous bucketfs left", "mountpoint", abs, "err", err, "output", strings.TrimSpace(string(out)))
			return
		}
		log.Warn("detached the dead mount a previous bucketfs of this bucket left (it stopped without unmounting); its changes not yet uploaded are in the cache and go up now",
			"mountpoint", abs)
	}
}

// mountpointPath makes mp absolute and resolves the symbolic links in it
// without asking a file system mounted on it (a dead mount answers
// ENOTCONN, a hung one never): the parent is resolved, and the last
// element is read as a link only when nothing is mounted on it (a mount
// point is never a link).
func mountpointPath(mp string) (string, error) {
	abs, err := filepath.Abs(mp)
	if err != nil {
		return "", err
	}
	for range 40 { // as many links as the kernel follows
		parent, err := filepath.EvalSymlinks(filepath.Dir(abs))
		if err != nil {
			return abs, nil // checkMountpoint reports it
		}
		abs = filepath.Join(parent, filepath.Base(abs))
		if _, mounted, _ := mountinfo.Lookup(abs); mounted {
			return abs, nil
		}
		target, err := os.Readlink(abs)
		if err != nil {
			return abs, nil // not a link (or missing: reported later)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(abs), target)
		}
		abs = target
	}
	return "", fmt.Errorf("mountpoint %s: too many levels of symbolic links", mp)
}

// deadMountError is the message for a dead mount left on abs that is not
// ours to detach.
func deadMountError(abs string) error {
	return fmt.Errorf("mountpoint %s is a dead FUSE mount (transport endpoint is not connected): clear it with 'fusermount3 -uz %s'", abs, abs)
}
