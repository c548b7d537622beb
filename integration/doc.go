// Package integration holds the end-to-end tests of bucketfs: the real
// bucketfs binary mounts a real FUSE filesystem over an in-process GCS
// emulator reached over HTTP by the official client. It also holds the
// benchmark harness (make bench). Nothing imports this package.
package integration
