package fs

import (
	"context"
	"errors"
	"log/slog"
	"syscall"

	"github.com/bucketfs/bucketfs/cache"
	"github.com/bucketfs/bucketfs/transfer"
)

// toErrno maps an error to an errno, logging the ones an operator should
// see. Errors are classified with errors.Is, never by their text.
func toErrno(log *slog.Logger, op, name string, err error) syscall.Errno {
	var errno syscall.Errno
	switch {
	case err == nil:
		return 0
	case unreachable(err) && !errors.Is(err, context.Canceled):
		// Before the errno case: a network errno must not reach
		// applications (offline.go).
		logUnreachable(log, op, name, err)
		return syscall.EIO
	case errors.As(err, &errno):
		return errno
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	case errors.Is(err, cache.ErrNoSpace):
		log.Warn("the cache is full", "op", op, "object", name, "err", err)
		return syscall.ENOSPC
	case errors.Is(err, cache.ErrTooBig):
		return syscall.EFBIG // the application's answer; counted in the errors metric
	case errors.Is(err, cache.ErrBusy):
		log.Warn("a directory changed while it was being renamed; the rename did nothing", "op", op, "object", name, "err", err)
		return syscall.EBUSY
	case errors.Is(err, cache.ErrDamaged):
		log.Error("the file is held: its cached copy failed a checksum check (see bucketfs status; bucketfs resolve keeps the local bytes or takes the bucket's version)", "op", op, "object", name, "err", err)
		return syscall.EIO
	case errors.Is(err, transfer.ErrChecksum):
		log.Error("bytes read from the bucket do not have the object's checksum; the file is fetched again at its next open", "op", op, "object", name, "err", err)
		return syscall.EIO
	case errors.Is(err, cache.ErrStale):
		log.Warn("the version this handle uses is gone (changed in the bucket, or deleted or renamed here); reopen the file", "op", op, "object", name, "err", err)
		return syscall.ESTALE
	case errors.Is(err, transfer.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, transfer.ErrPermission), errors.Is(err, transfer.ErrUnauthenticated):
		log.Error("bucket refused the request", "op", op, "object", name, "err", err)
		return syscall.EACCES
	case errors.Is(err, transfer.ErrBucketNotExist):
		log.Error("bucket is gone", "op", op, "err", err)
		return syscall.EIO
	default:
		log.Error("operation failed", "op", op, "object", name, "err", err)
		return syscall.EIO
	}
}
