// Package transfer moves bytes between bucketfs and an object store.
//
// Bucket is the one interface the rest of bucketfs uses to reach a bucket;
// its contract (concurrency, cancellation, error classes, retries) is
// written on the interface. GCS implements it over the official Go client
// with the JSON API, which emulators speak too. Decorators wrap a Bucket
// and are Buckets themselves: Limited caps the requests in flight over the
// whole process.
//
// Errors are classified once, here: every error a Bucket returns is an
// *OpError naming the call and object, wrapping one of the sentinels
// (ErrNotExist, ErrBucketNotExist, ErrPermission, ErrUnauthenticated,
// ErrPrecondition, ErrInvalid) when the store said so. Callers use
// errors.Is.
//
// Download fetches one object version in chunks with parallel range
// requests, pinned to its generation. A background walk goes through the
// object in order; Ensure fetches the chunks a reader needs at once, ahead
// of the walk, and shares a fetch that is already running.
package transfer
