package main

import (
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/coreos/go-systemd/v22/daemon"
)

// The mount tells whoever started it when it is live and when it stops:
//
//   - systemd (Type=notify, NOTIFY_SOCKET set): READY=1 once the mount is
//     live, STOPPING=1 when unmounting starts, STATUS= lines on the way
//     (systemctl status shows the last one).
//   - the mount helper (mount.fuse.bucketfs): one line on the pipe whose
//     descriptor is in $BUCKETFS_STATUS_FD, "ready" once the mount is live
//     or "error: MESSAGE" if the mount failed; then the pipe is closed.

// statusFDEnv names the helper's pipe; see mounthelper.go.
const statusFDEnv = "BUCKETFS_STATUS_FD"

// statusPipe is the helper's pipe, nil when not started by the helper or
// once reported. Only the main goroutine uses it.
var statusPipe *os.File

// openStatusPipe takes the helper's pipe from the environment, so that
// processes the mount starts (fusermount3) inherit neither it nor its name.
func openStatusPipe() *os.File {
	v, ok := os.LookupEnv(statusFDEnv)
	if !ok {
		return nil
	}
	os.Unsetenv(statusFDEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "bucketfs-status")
}

// reportStatus writes line to the helper's pipe and closes it.
func reportStatus(line string) {
	if statusPipe == nil {
		return
	}
	statusPipe.WriteString(strings.ReplaceAll(line, "\n", " ") + "\n")
	statusPipe.Close()
	statusPipe = nil
}

// sdNotify sends state to systemd if it asked for it (NOTIFY_SOCKET).
func sdNotify(log *slog.Logger, state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		log.Warn("cannot notify the service manager", "state", state, "err", err)
	}
}

// notifyReady says that the mount is live.
func notifyReady(log *slog.Logger, status string) {
	sdNotify(log, daemon.SdNotifyReady+"\nSTATUS="+status)
	reportStatus("ready")
}

// notifyStopping says that the mount is going away and changes are being
// flushed.
func notifyStopping(log *slog.Logger, status string) {
	sdNotify(log, daemon.SdNotifyStopping+"\nSTATUS="+status)
}
