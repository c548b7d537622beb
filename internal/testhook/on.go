//go:build bucketfs_testhooks

package testhook

import (
	"os"
	"time"
)

// pauses are the points of BUCKETFS_TEST_PAUSE, read once at start.
var pauses = parse(os.Getenv("BUCKETFS_TEST_PAUSE"))

// Pause sleeps for the duration BUCKETFS_TEST_PAUSE gives point, if any.
func Pause(point string) {
	if d := pauses[point]; d > 0 {
		time.Sleep(d)
	}
}

// Duration returns the duration BUCKETFS_TEST_PAUSE gives point, or def:
// a test sets a period of the binary (a check's interval) shorter.
func Duration(point string, def time.Duration) time.Duration {
	if d := pauses[point]; d > 0 {
		return d
	}
	return def
}
