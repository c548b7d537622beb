package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// capSysAdmin is the bit of CAP_SYS_ADMIN in a capability set.
const capSysAdmin = 21

// passthroughAllowed reports whether this process may hand the kernel
// backing files (FUSE passthrough): the kernel asks CAP_SYS_ADMIN of the
// daemon for it (FUSE_DEV_IOC_BACKING_OPEN). An unprivileged mount
// (through fusermount3) has no such capability: passthrough is off, so
// that reads and writes go through the daemon from the start, and a
// writer is not opened as one the kernel serves itself (see fs/file.go
// writeModeLocked) only to have its writes come to the daemon after all.
// It reads the effective set from /proc/self/status; if that cannot be
// read, it answers true and go-fuse finds out at the first open.
func passthroughAllowed() bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return true
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		v, ok := strings.CutPrefix(s.Text(), "CapEff:")
		if !ok {
			continue
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return true
		}
		return caps&(1<<capSysAdmin) != 0
	}
	return true
}
