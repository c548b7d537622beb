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
