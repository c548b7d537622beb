package fs

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// No network errno reaches applications: each is EIO, logged once per
// object.
func TestNetworkErrorsAreEIO(t *testing.T) {
	netErr := func(errno syscall.Errno) error {
		return &transfer.OpError{Op: "read", Bucket: "b", Object: "o", Err: &url.Error{Op: "Get", URL: "http://x",
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}}}
	}
	cases := []struct {
		name string
		err  error
		want syscall.Errno
	}{
		{"refused", netErr(syscall.ECONNREFUSED), syscall.EIO},
		{"reset", netErr(syscall.ECONNRESET), syscall.EIO},
		{"host unreachable", netErr(syscall.EHOSTUNREACH), syscall.EIO},
		{"timed out", netErr(syscall.ETIMEDOUT), syscall.EIO},
		{"bare errno", fmt.Errorf("x: %w", syscall.ECONNREFUSED), syscall.EIO},
		{"deadline", fmt.Errorf("ask: %w", context.DeadlineExceeded), syscall.EIO},
		{"offline", &transfer.OpError{Op: "stat", Err: fmt.Errorf("%w: cause", transfer.ErrOffline)}, syscall.EIO},
		{"local errno stays", fmt.Errorf("x: %w", syscall.ENOTEMPTY), syscall.ENOTEMPTY},
		{"cancel stays EINTR", context.Canceled, syscall.EINTR},
	}
	for i, c := range cases {
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		// The once-a-minute memory of logged objects is the package's:
		// a name of its own for each run (go test -count).
		name := fmt.Sprintf("obj-%d-%s-%d", i, t.Name(), time.Now().UnixNano())
		for range 3 {
			if got := toErrno(log, "read", name, c.err); got != c.want {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
		}
		if c.want == syscall.EIO {
			if n := strings.Count(logs.String(), name); n != 1 {
				t.Errorf("%s: %d log lines for three failures of one object, want 1:\n%s", c.name, n, logs.String())
			}
		}
	}
}
