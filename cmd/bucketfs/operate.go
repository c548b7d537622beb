package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bucketfs/bucketfs/cache"
	bfs "github.com/bucketfs/bucketfs/fs"
	"github.com/bucketfs/bucketfs/internal/control"
	"github.com/bucketfs/bucketfs/internal/metrics"
	"github.com/bucketfs/bucketfs/transfer"
)

// operations is what a mount shows its operators: Prometheus metrics on
// --metrics-addr, and the control socket that 'bucketfs status' and
// 'bucketfs flush' use. runMount makes it first, wraps the bucket and the
// file system with it, starts it once the cache is open and stops it
// before closing the cache.
type operations struct {
	log     *slog.Logger
	m       *metrics.Metrics
	metered *transfer.Metered
	breaker *transfer.Breaker // nil: no breaker (see offline.go)
	started time.Time
	// flushing: unmounted, sending the changes before the exit (set once).
	flushing atomic.Bool

	metricsSrv *metrics.Server
	ctl        *control.Server
	unregister func()

	notify announcements // the bucket's change notifications (announce.go)
}

func newOperations(log *slog.Logger) *operations {
	return &operations{log: log, m: metrics.New(version), started: time.Now()}
}

// meter wraps the bucket so that its calls are counted; put it inside
// the request limiter.
func (o *operations) meter(b transfer.Bucket) transfer.Bucket {
	o.metered = transfer.NewMetered(b, o.m.Bucket())
	return o.metered
}

// meterMultipart does the same for the XML multipart API (nil stays nil).
func (o *operations) meterMultipart(mp *transfer.Multipart) transfer.MultipartAPI {
	if mp == nil || o.metered == nil {
		return nil
	}
	return o.metered.Multipart(mp)
}

// fuseObserver counts FUSE requests (bfs.Options.OpObserver).
func (o *operations) fuseObserver() bfs.OpObserver { return o.m.FUSEOp }

// validMetricsAddr checks --metrics-addr ("" is off).
func validMetricsAddr(addr string) error {
	if addr == "" {
		return nil
	}
	_, err := metrics.ListenAddr(addr)
	return err
}

// start serves metrics (if c.metricsAddr is set) and the control socket
// in the cache dir, and records the socket for mountpoint mnt.
func (o *operations) start(c *mountConfig, mnt string, ch *cache.Cache) error {
	o.m.WatchCache(ch)
	if br := o.breaker; br != nil {
		o.m.WatchReachable(func() bool { return br.State().Online })
	}
	if c.metricsAddr != "" {
		s, err := o.m.Serve(c.metricsAddr, c.pprof, o.log)
		if err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		o.metricsSrv = s
		o.log.Info("serving metrics", "addr", s.Addr(), "url", "http://"+s.Addr()+"/metrics")
		if c.pprof {
			o.log.Info("serving Go's profiles", "url", "http://"+s.Addr()+"/debug/pprof/")
		}
	}
	cacheDir, err := filepath.Abs(c.cacheDir)
	if err != nil {
		return err
	}
	sock := filepath.Join(cacheDir, control.SocketName)
	ctl, err := control.Listen(sock, control.Handler{
		Status: func(maxDirty int) control.Status { return o.status(c, mnt, cacheDir, ch, maxDirty) },
		Flush: func(ctx context.Context, progress func(control.Progress)) []string {
			return ch.Flush(ctx, func(p cache.Progress) { progress(control.Progress{Files: p.Files, Bytes: p.Bytes}) })
		},
		Resolve: ch.Resolve,
		Warm:    warmHandler(ch),
		Unpin:   ch.Unpin,
	}, o.log)
	if err != nil {
		o.stop()
		return err
	}
	o.ctl = ctl
	unregister, err := control.Register(control.Record{
		Mountpoint: mnt, Socket: sock, CacheDir: cacheDir, Bucket: c.bucket, PID: os.Getpid(),
	})
	if err != nil {
		// The socket still works with --cache-dir.
		o.log.Warn("'bucketfs status MOUNTPOINT' will not find this mount; use --cache-dir", "err", err)
	} else {
		o.unregister = unregister
	}
	return nil
}

// stop ends what start started; it may be called more than once.
func (o *operations) stop() {
	if o.unregister != nil {
		o.unregister()
		o.unregister = nil
	}
	if o.ctl != nil {
		if err := o.ctl.Close(); err != nil && !errors.Is(err, os.ErrNotExist) {
			o.log.Warn("closing the control socket", "err", err)
		}
		o.ctl = nil
	}
	if o.metricsSrv != nil {
		o.metricsSrv.Close()
		o.metricsSrv = nil
	}
}

// status answers 'bucketfs status'.
func (o *operations) status(c *mountConfig, mnt, cacheDir string, ch *cache.Cache, maxDirty int) control.Status {
	s := ch.Status(maxDirty)
	st := control.Status{
		Version: version, PID: os.Getpid(), Bucket: c.bucket, Mountpoint: mnt, CacheDir: cacheDir, Started: o.started,
		Flushing: o.flushing.Load(),

		UsedBytes: s.UsedBytes, MaxBytes: s.MaxBytes, Entries: s.Entries,
		Hits: s.Hits, Misses: s.Misses, Uncached: s.Uncached, Evictions: s.Evictions, ReadBytes: s.ReadBytes,
		PrefetchUsedBytes: s.PrefetchUsedBytes, PrefetchWastedBytes: s.PrefetchWastedBytes,

		DirtyFiles: s.DirtyFiles, DirtyBytes: s.DirtyBytes, OldestDirty: s.OldestDirty,
		Queued: s.Queued, Uploads: s.Uploads, UploadFailures: s.UploadFailures, Conflicts: s.Conflicts,

		Uploading: s.Uploading, Downloading: s.Downloading,
	}
	o.bucketState(&st)
	o.notifyState(&st)
	st.MinFreeBytes = ch.MinFree()
	var fs syscall.Statfs_t
	if err := syscall.Statfs(cacheDir, &fs); err == nil {
		st.DiskFreeBytes = int64(fs.Bavail) * fs.Bsize
	}
	if o.metered != nil {
		st.BucketRequests = o.metered.InFlight()
	}
	for _, d := range s.Dirty {
		st.Dirty = append(st.Dirty, control.DirtyFile{Name: d.Name, Size: d.Size, Since: d.Since, Deleted: d.Deleted, Uploading: d.Uploading})
	}
	for _, e := range s.Errors {
		st.Errors = append(st.Errors, control.ErrorEvent{Time: e.Time, Op: e.Op, Object: e.Object, Err: e.Err})
	}
	st.ChecksumMismatches = s.ChecksumMismatches
	st.PinnedFiles, st.PinnedBytes = s.PinnedFiles, s.PinnedBytes
	for _, h := range s.Held {
		st.Held = append(st.Held, control.HeldFile{Name: h.Name, Why: h.Why})
	}
	for _, r := range s.Refused {
		st.Refused = append(st.Refused, control.RefusedFile{Name: r.Name, Since: r.Since, Why: r.Why})
	}
	return st
}
