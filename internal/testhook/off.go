//go:build !bucketfs_testhooks

package testhook

// Pause does nothing in a binary built without bucketfs_testhooks.
func Pause(point string) {}
