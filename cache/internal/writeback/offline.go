package writeback

import (
	"fmt"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// While the bucket is offline (New's online), the uploader starts no
// upload: changes stay queued, and are sent when it is back, by
// themselves.

// waitOnline blocks until the bucket is online, and reports false if the
// uploader's life ends first.
func (l *Loops[E]) waitOnline() bool {
	if l.online == nil {
		return true
	}
	select {
	case <-l.online():
		return true
	case <-l.life.Done():
		return false
	}
}

// offlineErr is the error of FlushName while the bucket is offline: the
// change is safe in the cache and queued, but not in the bucket, and an
// fsync that asked for the bucket must not hang for the whole outage.
func (l *Loops[E]) offlineErr(name string) error {
	if l.online == nil {
		return nil
	}
	select {
	case <-l.online():
		return nil
	default:
		return fmt.Errorf("%s is not in the bucket yet (it is kept in the cache and sent when the bucket is back): %w", name, transfer.ErrOffline)
	}
}

// offlineTick wakes FlushName to look at the bucket's state again (going
// offline signals nothing by itself); nil without online.
func (l *Loops[E]) offlineTick() <-chan time.Time {
	if l.online == nil {
		return nil
	}
	return time.After(time.Second)
}
