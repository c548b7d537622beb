// Package testhook lets the integration tests widen a race window inside
// the bucketfs binary, to reach an order of events that is otherwise rare
// (a kernel request between two steps of the daemon).
//
// A binary built without the build tag bucketfs_testhooks (every binary
// but the one the integration tests build) has Pause as a function that
// does nothing. With the tag, BUCKETFS_TEST_PAUSE=point=duration[,...]
// makes Pause(point) sleep that long. Points are named
// "package.what-comes-next".
package testhook
