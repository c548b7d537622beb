package fs

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// unreachable reports whether err says the bucket could not be reached:
// the breaker is open (transfer.ErrOffline), a network error (refused,
// reset, unreachable, timed out), or a deadline of a request that ran
// out. Applications get EIO for all of them, never a network errno: a
// file system has no ECONNREFUSED.
func unreachable(err error) bool {
	if errors.Is(err, transfer.ErrOffline) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	// Concrete types: syscall.Errno is a net.Error too, and a local
	// errno (ENOSPC of the cache's disk) must stay what it is.
	var (
		oe *net.OpError
		de *net.DNSError
		ue *url.Error
	)
	if errors.As(err, &oe) || errors.As(err, &de) || errors.As(err, &ue) {
		return true
	}
	for _, e := range []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
		syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ENETDOWN, syscall.EHOSTDOWN} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// offlineLogEvery is how often one object's failures for an unreachable
// bucket are logged: an application that retries its read, or the
// kernel that asks once a page, must not fill the log.
const offlineLogEvery = time.Minute

// offlineLog remembers when each object's last such line was written.
var offlineLog = struct {
	mu   sync.Mutex
	last map[string]time.Time
}{last: map[string]time.Time{}}

// logUnreachable logs a failure for an unreachable bucket, once per
// object per offlineLogEvery.
func logUnreachable(log *slog.Logger, op, name string, err error) {
	now := time.Now()
	offlineLog.mu.Lock()
	last, seen := offlineLog.last[name]
	if seen && now.Sub(last) < offlineLogEvery {
		offlineLog.mu.Unlock()
		return
	}
	if len(offlineLog.last) > 10000 {
		// Bounded: forget the old ones (they may log once more).
		for k, t := range offlineLog.last {
			if now.Sub(t) >= offlineLogEvery {
				delete(offlineLog.last, k)
			}
		}
	}
	offlineLog.last[name] = now
	offlineLog.mu.Unlock()
	if errors.Is(err, transfer.ErrOffline) {
		log.Warn("the bucket is unreachable and this needs it (an object not cached, or a name not known): EIO", "op", op, "object", name, "err", err)
		return
	}
	log.Error("the bucket could not be reached: EIO", "op", op, "object", name, "err", err)
}
