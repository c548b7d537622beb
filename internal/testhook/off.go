//go:build !bucketfs_testhooks

package testhook

import "time"

// Pause does nothing in a binary built without bucketfs_testhooks.
func Pause(point string) {}

// Duration returns def: without the tag no test sets periods.
func Duration(point string, def time.Duration) time.Duration { return def }
