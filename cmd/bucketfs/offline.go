package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/bucketfs/bucketfs/cache"
	"github.com/bucketfs/bucketfs/fs/names"
	"github.com/bucketfs/bucketfs/internal/control"
	"github.com/bucketfs/bucketfs/transfer"
)

// An offline start: a mount whose bucket cannot be reached at the start
// (refused, black-holed, timing out, 5xx) still starts if its cache holds
// what it knows of this bucket; it then runs offline (cached files,
// changes queued) and goes online by itself when the breaker's probe
// reaches the bucket. With nothing cached it fails as before. A bucket
// that answers with a refusal (missing, forbidden, bad credentials) is
// reachable: that fails the start as before.

// breakerOptions are the mount's circuit breaker settings.
func breakerOptions(c *mountConfig, log *slog.Logger) *transfer.BreakerOptions {
	return &transfer.BreakerOptions{Stall: c.offlineAfter, Logger: log}
}

// unreachableAtStart reports whether the start-up check failed because
// the bucket could not be reached (not because it refused).
func unreachableAtStart(err error) bool {
	return errors.Is(err, transfer.ErrOffline) || errors.Is(err, context.DeadlineExceeded)
}

// hasNamespace reports whether the cache directory holds a namespace of
// bucket to serve offline: names and listings of this bucket in names.db
// (fs/names), or records of its objects in the cache index (changes not
// yet uploaded among them, which an offline start keeps queueing).
func hasNamespace(cacheDir, bucket string) (bool, error) {
	known, nerr := names.HasNamespace(cacheDir, bucket)
	if known {
		return true, nil
	}
	has, err := cache.HasRecords(cacheDir, bucket)
	return has, errors.Join(nerr, err)
}

// startOffline decides, after the start-up check failed with checkErr
// (cause: the check's own error), whether the mount starts offline; if
// so it opens the breaker and says so in one line. It returns the error
// the start fails with otherwise.
func startOffline(c *mountConfig, gcs *transfer.GCS, cause, checkErr error, log *slog.Logger) error {
	br := gcs.Breaker()
	if br == nil || !unreachableAtStart(cause) {
		return checkErr
	}
	has, err := hasNamespace(c.cacheDir, c.bucket)
	if err != nil {
		log.Debug("reading the cache for an offline start", "err", err)
	}
	if !has {
		return checkErr
	}
	br.ForceOffline(cause)
	log.Warn("the bucket is unreachable: starting offline from the cache (cached files are served, changes are queued); the mount goes online when the bucket answers",
		"bucket", c.bucket, "cause", cause, "since", time.Now().Format(time.RFC3339))
	return nil
}

// bucketState fills in the bucket's reachability for 'bucketfs status'.
func (o *operations) bucketState(st *control.Status) {
	if o.breaker == nil {
		return
	}
	s := o.breaker.State()
	if s.Online {
		st.OnlineSince = s.Since
		return
	}
	st.Offline, st.OfflineSince, st.OfflineCause = true, s.Since, s.Cause
}

// printBucketState writes the status line of the bucket's reachability.
func printBucketState(w io.Writer, st control.Status, now time.Time) {
	if !st.Offline {
		if st.OnlineSince.IsZero() {
			fmt.Fprintf(w, "state:       online\n")
		} else {
			fmt.Fprintf(w, "state:       online (back since %s, %s ago)\n", st.OnlineSince.Local().Format(time.DateTime), now.Sub(st.OnlineSince).Round(time.Second))
		}
		return
	}
	fmt.Fprintf(w, "state:       OFFLINE since %s (%s): the bucket is unreachable: %s\n",
		st.OfflineSince.Local().Format(time.DateTime), now.Sub(st.OfflineSince).Round(time.Second), st.OfflineCause)
	waits := "no changes wait"
	if st.DirtyFiles > 0 {
		waits = fmt.Sprintf("%d changed files (%s) wait, the oldest for %s", st.DirtyFiles, humanSize(st.DirtyBytes), now.Sub(st.OldestDirty).Round(time.Second))
	}
	fmt.Fprintf(w, "             cached files are served, changes are queued (%s); uploads resume when it answers\n", waits)
}

// An unmount while the bucket is away does not wait for --flush-timeout
// (ten minutes by default, for a systemctl stop or a reboot too): the
// flush ends once the bucket is known to be away, and what is left stays
// in the cache for the next mount, as the durability contract says.

// offlineWatch ends a flush when the bucket is away; see watchOffline.
type offlineWatch struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	why string // guarded by mu: the outage that ended the flush, if one did
}

// watchOffline cancels the flush (ctx, cancel) once the bucket is known
// to be away: at once if br is open and one probe sent now gets no good
// answer either, or when br opens during the flush (it opens only once a
// probe failed too). A nil br watches nothing. The caller calls wait
// after cancelling ctx.
func watchOffline(ctx context.Context, br *transfer.Breaker, cancel context.CancelFunc) *offlineWatch {
	w := &offlineWatch{}
	if br == nil {
		return w
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		if !br.State().Online {
			if err := br.ProbeNow(ctx); err != nil && ctx.Err() == nil {
				w.end(br, err, cancel)
				return
			}
		}
		select {
		case <-br.Offline():
			w.end(br, nil, cancel)
		case <-ctx.Done():
		}
	}()
	return w
}

// end records why the bucket is taken as away (the breaker's cause, else
// err) and cancels the flush.
func (w *offlineWatch) end(br *transfer.Breaker, err error, cancel context.CancelFunc) {
	why := br.State().Cause
	if why == "" && err != nil {
		why = err.Error()
	}
	if why == "" {
		why = transfer.ErrOffline.Error()
	}
	w.mu.Lock()
	w.why = why
	w.mu.Unlock()
	cancel()
}

// cause is the outage that ended the flush; "" if none did.
func (w *offlineWatch) cause() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.why
}

// wait waits for the watch to end; ctx must be done or ending.
func (w *offlineWatch) wait() { w.wg.Wait() }
