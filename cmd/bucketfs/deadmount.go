package main

import (
	"bufio"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// clearDeadMount detaches a dead mount of the same bucket that a bucketfs
// which stopped without unmounting (kill -9, OOM, a crash) left on mp, so
// that the next start (systemd's Restart=on-failure, a mount from fstab)
// can mount again. A live mount, or a dead mount of anything else, is left
// alone, for checkMountpoint to report.
func clearDeadMount(mp, bucket string, log *slog.Logger) {
	abs, err := filepath.Abs(mp)
	if err != nil {
		return
	}
	if _, err := os.Stat(abs); !errors.Is(err, syscall.ENOTCONN) {
		return
	}
	fstype, source, ok := mountOf(abs)
	if !ok || fstype != "fuse.bucketfs" || source != "bucketfs:"+bucket {
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

// mountOf returns the file system type and source of the mount on dir,
// from /proc/self/mountinfo (the last one, if several are stacked).
func mountOf(dir string) (fstype, source string, ok bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || unescapeMountinfo(fields[4]) != dir {
			continue
		}
		for i, fl := range fields {
			if fl == "-" && i+2 < len(fields) {
				fstype, source, ok = fields[i+1], unescapeMountinfo(fields[i+2]), true
			}
		}
	}
	return fstype, source, ok
}
