package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bucketfs/bucketfs/cache"
	"github.com/bucketfs/bucketfs/internal/control"
)

// A start on a cache directory that another process holds (a live mount,
// one still flushing after its unmount, or fsck) fails before the bucket
// is asked, and says who holds it: the process, and if its control
// socket answers, where it is mounted, whether it is still flushing and
// how much is left. Asked first, the bucket gave a network error for a
// local cause: with the bucket away, the offline start found the index
// locked, and the start failed with "cannot reach bucket".

// heldError is the error of a start on a cache directory another process
// holds; it matches cache.ErrCacheInUse.
type heldError struct{ msg string }

func (e *heldError) Error() string { return e.msg }
func (e *heldError) Unwrap() error { return cache.ErrCacheInUse }

// askHolderTimeout bounds the question to the holder's control socket.
const askHolderTimeout = 3 * time.Second

// checkCacheFree fails if another process holds cacheDir (see heldBy). An
// index that cannot be read is left to the cache's open, which says why.
func checkCacheFree(ctx context.Context, cacheDir string) error {
	if held, err := cache.InUse(cacheDir); err != nil || !held {
		return nil
	}
	return heldBy(ctx, cacheDir)
}

// heldBy describes the process that holds cacheDir, as a *heldError.
func heldBy(ctx context.Context, cacheDir string) error {
	ctx, cancel := context.WithTimeout(ctx, askHolderTimeout)
	defer cancel()
	where := cacheDir
	if abs, err := filepath.Abs(cacheDir); err == nil {
		where = abs
	}
	st, err := control.GetStatus(ctx, filepath.Join(where, control.SocketName), 1)
	var b strings.Builder
	fmt.Fprintf(&b, "cache directory %s is in use by ", where)
	switch {
	case err == nil && st.Flushing:
		fmt.Fprintf(&b, "bucketfs pid %d, unmounted from %s and still sending its changes to gs://%s before it exits: %d files (%s) left",
			st.PID, st.Mountpoint, st.Bucket, st.DirtyFiles, humanSize(st.DirtyBytes))
		if st.Offline {
			b.WriteString(" (the bucket is unreachable: it gives up soon, and the next mount sends them)")
		}
		b.WriteString("; start again once it has exited ('bucketfs status --cache-dir " + where + "' shows its progress)")
	case err == nil:
		fmt.Fprintf(&b, "bucketfs pid %d, mounted on %s (gs://%s); unmount it first, or give this mount another --cache-dir",
			st.PID, st.Mountpoint, st.Bucket)
	default:
		if pid := lockHolder(cache.IndexPath(where)); pid > 0 {
			fmt.Fprintf(&b, "process %d (%s)", pid, commandOf(pid))
		} else {
			b.WriteString("another process")
		}
		fmt.Fprintf(&b, "; it did not answer on its control socket (%v): a bucketfs fsck, or a mount still starting or stopping; start again once it has exited", err)
	}
	return &heldError{msg: b.String()}
}

// lockHolder finds in /proc/locks the process that holds a lock on the
// file at path; 0 if none is found. A lock's file is named there by
// device (major:minor, in hex) and inode; a waiter's line has "->".
func lockHolder(path string) int {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	data, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	exact := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	inode := ":" + strconv.FormatUint(st.Ino, 10)
	found := 0
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line) // "1: FLOCK  ADVISORY  WRITE 8152 00:2d:1234 0 EOF"
		if len(f) < 6 || f[1] == "->" {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		switch {
		case err != nil:
		case f[5] == exact:
			return pid
		case strings.HasSuffix(f[5], inode) && found == 0:
			found = pid // stat and the kernel may name the device apart (overlayfs)
		}
	}
	return found
}

// commandOf is process pid's command line, shortened, for a message.
func commandOf(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(data) == 0 {
		return "command line unknown"
	}
	s := strings.TrimSpace(strings.ReplaceAll(string(data), "\x00", " "))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return redactString(s)
}
