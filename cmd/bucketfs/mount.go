package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bucketfs/bucketfs/internal/metrics"
	"github.com/bucketfs/bucketfs/internal/mountinfo"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/bucketfs/bucketfs/cache"
	bfs "github.com/bucketfs/bucketfs/fs"
	"github.com/bucketfs/bucketfs/fs/names"
	"github.com/bucketfs/bucketfs/transfer"
)

// mountConfig is everything the mount command is told.
type mountConfig struct {
	bucket, mountpoint string

	cacheDir     string
	cacheMax     Size
	cacheMinFree AutoSize
	fullWait     time.Duration
	endpoint     string
	anonymous    bool
	metadataTTL  time.Duration
	metaStrict   bool
	metaMaxNames int
	chunkSize    Size
	minRange     Size
	wholeMax     AutoSize
	parallelism  int
	maxRequests  int
	uid, gid     int
	fileMode     Mode
	dirMode      Mode
	readOnly     bool
	noexec       bool
	allowOther   bool
	passthrough  bool
	ptWrites     bool
	wbCache      bool
	logLevel     string
	logFormat    string
	configFile   string
	debugFUSE    bool
	checkTimeout time.Duration
	offlineAfter time.Duration // see offline.go
	stallTimeout time.Duration

	writeBackDelay    time.Duration
	flushTimeout      time.Duration
	uploadParallelism int
	fsyncMode         string
	largeThreshold    Size
	resumableAt       Size
	partSize          Size
	partParallelism   int
	multipartEndpoint string
	clientProtocol    string
	caFile            string

	memoryLimit Size // see memory.go

	metricsAddr string // see operate.go
	pprof       bool   // Go's profiles on the metrics listener
	prefetch    prefetchConfig

	notifyTopic, notifySubscription string // the bucket's change notifications (announce.go)
}

func newMountFlags(c *mountConfig) *flag.FlagSet {
	fl := flag.NewFlagSet("mount", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	c.cacheMax = 10 << 30
	c.cacheMinFree = -1
	c.chunkSize = 8 << 20
	c.minRange = 1 << 20
	c.wholeMax = -1
	c.largeThreshold = 32 << 20
	c.resumableAt = transfer.DefaultResumableThreshold
	c.partSize = transfer.DefaultPartSize
	c.memoryLimit = defaultMemory
	c.fileMode = 0o644
	c.dirMode = 0o755
	fl.StringVar(&c.cacheDir, "cache-dir", "", "cache `DIR` on local disk, one per bucket (default: /var/cache/bucketfs/BUCKET as root, else $XDG_CACHE_HOME/bucketfs/BUCKET)")
	fl.Var(&c.cacheMax, "cache-max-size", "most object data kept in the cache, e.g. 512MiB, 20GiB")
	fl.Var(&c.cacheMinFree, "cache-min-free", "free space kept on the cache's disk: below it, cached copies are evicted; auto is 5% of the disk, at most 1GiB; 0 for none")
	fl.DurationVar(&c.fullWait, "cache-full-wait", 30*time.Second, "how long a write that finds the cache (or its disk) full of changes waits for uploads before it fails with ENOSPC")
	fl.StringVar(&c.endpoint, "endpoint", "", "GCS JSON API `URL`, e.g. http://127.0.0.1:4443 for an emulator (default: Google's)")
	fl.BoolVar(&c.anonymous, "anonymous", false, "send no credentials (public buckets, emulators)")
	fl.DurationVar(&c.metadataTTL, "metadata-ttl", time.Minute, "how long names and attributes are trusted before the bucket is asked again; changes made by others show up after this")
	fl.BoolVar(&c.metaStrict, "metadata-strict", false, "past --metadata-ttl, wait for the bucket; by default a known name or listing is answered at once and refreshed in the background")
	fl.IntVar(&c.metaMaxNames, "metadata-max-names", names.DefaultMaxNames, "most names and attributes kept in CACHE_DIR/names.db across mounts; the least recently used directories go first")
	fl.Var(&c.memoryLimit, "memory-limit", "memory the mount aims to stay within: past their shares of it, the kernel is asked to forget the least recently used inodes and names leave memory for CACHE_DIR/names.db; also the Go runtime's soft memory limit; 0 for no bound")
	fl.Var(&c.chunkSize, "prefetch-chunk-size", "bytes per range request when an object is fetched, and the unit of the cache's checksums")
	fl.Var(&c.minRange, "prefetch-min-range", "least bytes per range request when an object of fewer chunks than --prefetch-parallelism is fetched in several at once (an 8MiB object in 8 of 1MiB); --prefetch-chunk-size or more: one request per chunk")
	fl.Var(&c.wholeMax, "prefetch-whole-max", "objects up to this size are fetched whole on their first read; larger ones as they are read, and whole once read in order or a quarter of them is; auto is 1/64 of --cache-max-size, between the chunk size and 256MiB; 0 fetches every object whole")
	fl.IntVar(&c.parallelism, "prefetch-parallelism", 16, "range requests in flight per object being fetched")
	fl.IntVar(&c.maxRequests, "max-requests", 64, "requests in flight to the bucket, over all objects")
	fl.IntVar(&c.uid, "uid", os.Getuid(), "owner of directories, and of files with no owner stored (chown keeps one)")
	fl.IntVar(&c.gid, "gid", os.Getgid(), "group of directories, and of files with no group stored")
	fl.Var(&c.fileMode, "file-mode", "permission bits of files with no mode stored (chmod keeps one; octal)")
	fl.Var(&c.dirMode, "dir-mode", "permission bits of directories (octal)")
	fl.BoolVar(&c.readOnly, "read-only", false, "mount read-only")
	fl.BoolVar(&c.allowOther, "allow-other", false, "let other users use the mount (needs user_allow_other in /etc/fuse.conf unless root)")
	fl.BoolVar(&c.passthrough, "passthrough", true, "let the kernel read fully cached files directly (FUSE passthrough, Linux >= 6.9, root)")
	fl.BoolVar(&c.ptWrites, "passthrough-writes", true, "let the kernel write new files and fully cached ones directly too, at local-disk speed (with --passthrough); such a file may pass --cache-max-size while it is written, up to what the cache's disk holds (ENOSPC), and a file past 5 TiB fails at fsync and close (EFBIG)")
	fl.BoolVar(&c.wbCache, "writeback-cache", false, "let the kernel keep written pages and send them to bucketfs later, in large writes (FUSE writeback cache): buffered writes at page-cache speed; write errors, the cap and the file size limit show at fsync and close, not at write; a crash loses what was not yet closed or fsynced; passthrough is off")
	fl.StringVar(&c.logLevel, "log-level", "info", "least important messages logged: debug, info, warn or error")
	fl.StringVar(&c.logFormat, "log-format", "text", "text (key=value lines) or json (one object a line)")
	fl.StringVar(&c.configFile, "config", "", "YAML `FILE` of settings: keys are the flag names, plus bucket and mountpoint; flags win over it")
	fl.BoolVar(&c.noexec, "noexec", false, "forbid running programs from the mount")
	fl.BoolVar(&c.debugFUSE, "debug-fuse", false, "log every FUSE request (very verbose)")
	fl.DurationVar(&c.checkTimeout, "check-timeout", 30*time.Second, "how long the start-up check of the bucket may take")
	fl.DurationVar(&c.offlineAfter, "offline-after", 3*time.Second, "a request with no progress for this long (or 3 5xx answers in a row over as long, or 3 connections refused or broken in a row) makes bucketfs probe the bucket; with no good answer within as long again it is taken as offline: cached files are served, changes queued, other reads fail with EIO, until it answers again")
	fl.DurationVar(&c.stallTimeout, "stall-timeout", transfer.DefaultStallTimeout, "a read or upload whose body makes no progress for this long is cancelled: a read is taken up by a new request, an upload sent again; 0 never")
	fl.DurationVar(&c.writeBackDelay, "write-back-delay", 5*time.Second, "wait after the last close of a changed file before uploading it")
	fl.DurationVar(&c.flushTimeout, "flush-timeout", 10*time.Minute, "at unmount, how long to wait for changes to reach the bucket; what is left stays in the cache and goes up at the next mount")
	fl.IntVar(&c.uploadParallelism, "upload-parallelism", 8, "uploads in flight")
	fl.Var(&c.largeThreshold, "parallel-upload-threshold", "files this big or bigger are uploaded in parts sent in parallel")
	fl.Var(&c.resumableAt, "resumable-threshold", "files this big or bigger that go up in one piece (and the parts of a parallel upload without the XML API) are sent as a resumable upload, resumed where it broke off after a broken connection or a stall; 0 never")
	fl.Var(&c.partSize, "part-size", "bytes per part of a parallel upload (at least 5MiB)")
	fl.IntVar(&c.partParallelism, "part-parallelism", transfer.DefaultPartParallelism, "parts in flight, over all parallel uploads")
	fl.StringVar(&c.multipartEndpoint, "multipart-endpoint", "", "XML API `URL` for multipart uploads (default: https://storage.googleapis.com, or the host of --endpoint); without that API, parts are composed through the JSON API")
	fl.StringVar(&c.clientProtocol, "client-protocol", string(transfer.HTTP1), "HTTP version spoken to the bucket: http1 (a TCP connection per request in flight, so parallel reads and parts get parallel connections) or http2 (one multiplexed connection; measured slower for large transfers)")
	fl.StringVar(&c.caFile, "ca-file", "", "PEM `FILE` of certificates trusted besides the system's, for an endpoint with a private CA (or an emulator over TLS)")
	fl.StringVar(&c.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on http://`ADDR`/metrics; a bare port (9100 or :9100) listens on 127.0.0.1 only")
	fl.BoolVar(&c.pprof, "pprof", false, "also serve Go's runtime profiles (heap, goroutines, CPU) at /debug/pprof/ on --metrics-addr, which must then be a loopback address")
	fl.StringVar(&c.notifyTopic, "notify-topic", "", "apply the bucket's change notifications from this Pub/Sub `TOPIC` (projects/P/topics/T, the topic of a notification configuration of the bucket) as they come, through a subscription the mount makes (named bucketfs-HOST-HASH, filtered to the bucket, expiring a day after its last use) and deletes at unmount: changes made elsewhere show within a second, and what is known is trusted past --metadata-ttl while they are received")
	fl.StringVar(&c.notifySubscription, "notify-subscription", "", "as --notify-topic, through this existing Pub/Sub `SUBSCRIPTION` (projects/P/subscriptions/S) of such a topic, kept at unmount")
	fl.StringVar(&c.fsyncMode, "fsync", "local", "local: fsync makes a file durable on local disk; remote: fsync waits until it is in the bucket")
	c.prefetch.addFlags(fl)
	return fl
}

// parseMountArgs reads BUCKET, MOUNTPOINT and flags, in any order, and the
// --config file if one is named: the file first, then the command line
// over it.
func parseMountArgs(args []string) (*mountConfig, error) {
	c := &mountConfig{}
	fl := newMountFlags(c)
	pos, err := parseFlags(fl, args)
	if err != nil {
		return nil, err
	}
	if file := c.configFile; file != "" {
		c = &mountConfig{}
		fl = newMountFlags(c)
		bucket, mountpoint, err := applyConfigFile(file, fl)
		if err != nil {
			return nil, err
		}
		if pos, err = parseFlags(fl, args); err != nil {
			return nil, err
		}
		if len(pos) == 0 && bucket != "" && mountpoint != "" {
			pos = []string{bucket, mountpoint}
		}
	}
	if len(pos) != 2 {
		return nil, &usageError{fmt.Sprintf("mount takes BUCKET and MOUNTPOINT (or bucket: and mountpoint: in the --config file), got %d arguments", len(pos))}
	}
	c.bucket, c.mountpoint = strings.TrimPrefix(pos[0], "gs://"), pos[1]
	c.bucket = strings.TrimSuffix(c.bucket, "/")
	return c, c.validate()
}

// parseFlags parses args into fl and returns the arguments that are not
// flags; flags may come before, between and after them.
func parseFlags(fl *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fl.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Print(mountUsage(fl))
				return nil, flag.ErrHelp
			}
			return nil, &usageError{err.Error()}
		}
		if fl.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fl.Arg(0))
		args = fl.Args()[1:]
	}
}

func (c *mountConfig) validate() error {
	bad := func(f string, a ...any) error { return &usageError{fmt.Sprintf(f, a...)} }
	if c.notifyTopic != "" && c.notifySubscription != "" {
		return bad("--notify-topic and --notify-subscription: give one (a subscription of the mount's own on a topic, or one made already)")
	}
	if err := transfer.ValidBucketName(c.bucket); err != nil {
		return &usageError{err.Error()}
	}
	switch {
	case c.cacheMax <= 0:
		return bad("--cache-max-size must be more than 0")
	case c.fullWait <= 0:
		return bad("--cache-full-wait must be more than 0")
	case c.chunkSize < 64<<10 || c.chunkSize > 1<<30:
		return bad("--prefetch-chunk-size must be between 64KiB and 1GiB, got %s", FormatSize(int64(c.chunkSize)))
	case c.minRange < 64<<10:
		return bad("--prefetch-min-range must be at least 64KiB, got %s", FormatSize(int64(c.minRange)))
	case c.parallelism < 1 || c.parallelism > 1024:
		return bad("--prefetch-parallelism must be between 1 and 1024, got %d", c.parallelism)
	case c.maxRequests < 1 || c.maxRequests > 4096:
		return bad("--max-requests must be between 1 and 4096, got %d", c.maxRequests)
	case c.metadataTTL < 0:
		return bad("--metadata-ttl must not be negative")
	case c.metaMaxNames < 1:
		return bad("--metadata-max-names must be at least 1")
	case c.memoryLimit < 0 || c.memoryLimit > 0 && c.memoryLimit < 64<<20:
		return bad("--memory-limit must be 0 (no bound) or at least 64MiB, got %s", FormatSize(int64(c.memoryLimit)))
	case c.uid < 0 || c.gid < 0:
		return bad("--uid and --gid must not be negative")
	case c.fileMode > 0o777 || c.dirMode > 0o777:
		return bad("--file-mode and --dir-mode take permission bits up to 0777")
	case c.checkTimeout <= 0:
		return bad("--check-timeout must be positive")
	case c.offlineAfter < 100*time.Millisecond:
		return bad("--offline-after must be at least 100ms")
	case c.stallTimeout < 0:
		return bad("--stall-timeout must not be negative (0 turns it off)")
	case c.writeBackDelay < 0:
		return bad("--write-back-delay must not be negative")
	case c.flushTimeout <= 0:
		return bad("--flush-timeout must be positive")
	case c.uploadParallelism < 1 || c.uploadParallelism > 1024:
		return bad("--upload-parallelism must be between 1 and 1024, got %d", c.uploadParallelism)
	case c.largeThreshold < 1<<20:
		return bad("--parallel-upload-threshold must be at least 1MiB, got %s", FormatSize(int64(c.largeThreshold)))
	case c.partSize < transfer.MinPartSize || c.partSize > 5<<30:
		return bad("--part-size must be between 5MiB and 5GiB, got %s", FormatSize(int64(c.partSize)))
	case c.partParallelism < 1 || c.partParallelism > 1024:
		return bad("--part-parallelism must be between 1 and 1024, got %d", c.partParallelism)
	case c.fsyncMode != "local" && c.fsyncMode != "remote":
		return bad("--fsync must be local or remote, got %q", c.fsyncMode)
	}
	if _, err := transfer.ParseProtocol(c.clientProtocol); err != nil {
		return bad("--client-protocol: %v", err)
	}
	if c.multipartEndpoint != "" {
		u, err := url.Parse(c.multipartEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("--multipart-endpoint must be a URL such as https://storage.googleapis.com, got %q", c.multipartEndpoint)
		}
	}
	if err := c.prefetch.validate(); err != nil {
		return err
	}
	if err := validMetricsAddr(c.metricsAddr); err != nil {
		return bad("--metrics-addr: %v", err)
	}
	if c.pprof && (c.metricsAddr == "" || !metrics.Loopback(c.metricsAddr)) {
		return bad("--pprof needs --metrics-addr on a loopback address (such as 127.0.0.1:9100 or a bare port): profiles show the process's memory, got %q", c.metricsAddr)
	}
	if _, err := newLogger(io.Discard, c.logLevel, c.logFormat); err != nil {
		return &usageError{err.Error()}
	}
	if c.cacheDir == "" {
		c.cacheDir = defaultCacheDir(c.bucket)
	}
	return nil
}

func defaultCacheDir(bucket string) string {
	if os.Getuid() == 0 {
		return filepath.Join("/var/cache/bucketfs", bucket)
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "bucketfs", bucket)
	}
	return filepath.Join(os.TempDir(), "bucketfs-cache", bucket)
}

func runMount(args []string) error {
	c, err := parseMountArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	catchBrokenPipes() // logging.go: a log reader that goes away does not stop the flush
	log, err := newLogger(newLogStream(os.Stderr, "stderr", journalNote), c.logLevel, c.logFormat)
	if err != nil {
		return err
	}
	ops := newOperations(log)
	defer ops.stop()

	ctx := context.Background()
	// Before the bucket is asked: a held cache is a local cause (held.go).
	if err := checkCacheFree(ctx, c.cacheDir); err != nil {
		return err
	}
	mnt, err := prepareMountpoint(c, log)
	if err != nil {
		return err
	}

	gcs, err := transfer.NewGCS(ctx, c.bucket, transfer.GCSOptions{
		Endpoint:           c.endpoint,
		Anonymous:          c.anonymous,
		MaxConnsPerHost:    c.maxRequests + c.maxRequests/4 + c.partParallelism, // transfer.Limited keeps a quarter more for readers' reads
		Protocol:           transfer.Protocol(c.clientProtocol),
		CAFile:             c.caFile,
		UserAgent:          "bucketfs/" + version,
		Breaker:            breakerOptions(c, log),
		StallTimeout:       stallTimeoutOption(c.stallTimeout),
		ResumableThreshold: resumableOption(c.resumableAt),
	})
	if err != nil {
		return err
	}
	defer gcs.Close()
	bucket, large, err := openBucket(ctx, c, gcs, ops, log)
	if err != nil {
		return err
	}

	ch, err := openCache(c, bucket, large, gcs.Breaker(), log)
	if errors.Is(err, cache.ErrCacheInUse) {
		return heldBy(ctx, c.cacheDir) // taken since checkCacheFree
	}
	if err != nil {
		return err
	}
	cacheClosed := false
	defer func() {
		if !cacheClosed {
			ch.Close()
		}
	}()

	fsys := newFS(c, bucket, ch, ops, log)
	defer fsys.Close()
	ops.m.WatchNodes(fsys.KernelNodes)
	if err := ops.start(c, mnt, ch); err != nil {
		return err
	}
	// Signals are caught before the mount is live, so that a SIGTERM right
	// after it unmounts cleanly instead of killing the process.
	sigs := make(chan os.Signal, 2)
	// SIGHUP: the terminal the mount runs in was closed; unmount and
	// flush as for Ctrl-C rather than die with the changes unsent.
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	// Subscribed before the mount is live: a change made once the mount
	// can be used is announced to it.
	sub, err := startAnnouncements(ctx, c, mnt, fsys, ops, log)
	if err != nil {
		// Mounted without them: said once, changes show by the TTL.
		log.Error("notifications cannot be used; changes made elsewhere show after --metadata-ttl", "err", err)
	}
	server, err := fsys.Mount(mnt)
	if err != nil {
		stopAnnouncements(sub, fsys, log)
		return fmt.Errorf("mounting on %s: %w", mnt, err)
	}
	log.Info("mounted", "bucket", c.bucket, "mountpoint", mnt, "cache_dir", c.cacheDir,
		"cache_max_size", FormatSize(int64(c.cacheMax)), "read_only", c.readOnly, "pid", os.Getpid())
	notifyReady(log, fmt.Sprintf("gs://%s mounted on %s", c.bucket, mnt))

	serveUntilUnmounted(server, mnt, sigs, log)
	stopAnnouncements(sub, fsys, log)
	ops.flushing.Store(true) // a start on the same cache dir says so (held.go)
	fsys.StopPrefetch()      // before the cache closes

	// The kernel sends no more requests: everything changed is in the
	// cache. Files it did not release (an unmount can drop the release of
	// a file closed just before) are closed here, so their uploads need
	// not wait for it. Then send everything to the bucket, within the
	// flush timeout.
	if n := ch.CloseWriters(); n > 0 {
		log.Info("closed files the kernel left open for writing at the unmount", "files", n)
	}
	left := flush(ch, gcs.Breaker(), c.flushTimeout, sigs, log)
	ops.stop()
	cacheClosed = true
	err = ch.Close()
	// After the cache: the changes its last uploads confirmed reach
	// names.db too.
	fsys.Close()
	if err != nil {
		return fmt.Errorf("closing cache: %w", err)
	}
	if len(left) > 0 {
		return fmt.Errorf("%d changed files are not in the bucket yet; they stay in %s and are uploaded by the next mount: %s",
			len(left), c.cacheDir, strings.Join(left, ", "))
	}
	log.Info("stopped", "mountpoint", mnt)
	return nil
}

// prepareMountpoint checks that FUSE can be used, detaches a dead mount a
// crashed bucketfs left on the mountpoint, and checks the mountpoint; it
// returns the mountpoint's cleaned path.
func prepareMountpoint(c *mountConfig, log *slog.Logger) (string, error) {
	if err := checkFUSE(); err != nil {
		return "", err
	}
	clearDeadMount(c.mountpoint, c.bucket, log)
	return checkMountpoint(c.mountpoint)
}

// openBucket wraps gcs with the metrics and the --max-requests limit,
// checks the bucket, and builds the parallel uploader for large files.
func openBucket(ctx context.Context, c *mountConfig, gcs *transfer.GCS, ops *operations, log *slog.Logger) (transfer.Bucket, *transfer.Parallel, error) {
	bucket := transfer.NewLimited(ops.meter(gcs), c.maxRequests)
	ops.breaker = gcs.Breaker()
	held := false
	if cause, err := checkBucket(ctx, bucket, c); err != nil {
		if err := startOffline(c, gcs, cause, err, log); err != nil {
			return nil, nil, err
		}
	} else {
		held = holdsDeletes(ctx, gcs, c, log)
	}
	mp, err := gcs.Multipart(c.multipartEndpoint)
	if err != nil {
		return nil, nil, err
	}
	large := transfer.NewParallel(bucket, transfer.ParallelOptions{
		PartSize:    int64(c.partSize),
		Parallelism: c.partParallelism,
		Multipart:   ops.meterMultipart(mp),
		Logger:      log,
		NoStaging:   held,
	})
	return bucket, large, nil
}

// openCache opens the cache directory with the mount's settings.
func openCache(c *mountConfig, bucket transfer.Bucket, large *transfer.Parallel, br *transfer.Breaker, log *slog.Logger) (*cache.Cache, error) {
	var online func() <-chan struct{}
	if br != nil {
		online = br.Online
	}
	return cache.Open(cache.Options{
		Dir:         c.cacheDir,
		MaxSize:     int64(c.cacheMax),
		MinFree:     int64(c.cacheMinFree),
		FullWait:    c.fullWait,
		ChunkSize:   int64(c.chunkSize),
		MinRange:    int64(c.minRange),
		Parallelism: c.parallelism,
		WholeMax:    wholeMax(c),
		Logger:      log,

		WriteBackDelay:    c.writeBackDelay,
		UploadParallelism: c.uploadParallelism,
		Large:             large,
		LargeThreshold:    int64(c.largeThreshold),
		Online:            online,
	}, bucket)
}

// newFS builds the FUSE tree with the mount's settings.
func newFS(c *mountConfig, bucket transfer.Bucket, ch *cache.Cache, ops *operations, log *slog.Logger) *bfs.FS {
	if c.passthrough && !passthroughAllowed() {
		log.Info("FUSE passthrough needs CAP_SYS_ADMIN, which this process lacks (an unprivileged mount): reads and writes of cached files go through bucketfs")
		c.passthrough = false
	}
	if c.wbCache && c.passthrough && c.ptWrites {
		log.Warn("--passthrough-writes is ignored with --writeback-cache: the kernel refuses FUSE passthrough with its writeback cache")
	}
	nodes, names := memoryShares(int64(c.memoryLimit))
	setMemoryLimit(int64(c.memoryLimit), log)
	return bfs.New(bucket, ch, bfs.Options{
		MaxNodes:         nodes,
		MetadataMemNames: names,
		UID:              uint32(c.uid), GID: uint32(c.gid),
		FileMode: uint32(c.fileMode), DirMode: uint32(c.dirMode),
		MetadataTTL:       c.metadataTTL,
		MetadataStrict:    c.metaStrict,
		MetadataMaxNames:  c.metaMaxNames,
		NamesDir:          c.cacheDir,
		ReadOnly:          c.readOnly,
		NoExec:            c.noexec,
		FsyncRemote:       c.fsyncMode == "remote",
		AllowOther:        c.allowOther,
		Passthrough:       c.passthrough,
		PassthroughWrites: c.passthrough && c.ptWrites,
		WritebackCache:    c.wbCache,
		Logger:            log,
		Debug:             c.debugFUSE,
		OpObserver:        ops.fuseObserver(),
		Prefetch:          c.prefetch.options(c.maxRequests),
	})
}

// serveUntilUnmounted returns once the mount is gone: unmounted from
// outside (fusermount3 -u, umount), or by us on SIGINT or SIGTERM, lazily
// if files are still open.
func serveUntilUnmounted(server *fuse.Server, mnt string, sigs <-chan os.Signal, log *slog.Logger) {
	served := make(chan struct{})
	go func() {
		server.Wait()
		close(served)
	}()
	select {
	case <-served:
		log.Info("unmounted from outside", "mountpoint", mnt)
		notifyStopping(log, "unmounted; flushing changes to the bucket")
	case s := <-sigs:
		log.Info("unmounting", "signal", s.String(), "mountpoint", mnt)
		notifyStopping(log, "unmounting; then flushing changes to the bucket")
		if err := server.Unmount(); err != nil {
			log.Warn("mountpoint busy; detaching it lazily (it goes away when the last file is closed)", "err", err)
			if out, err := exec.Command("fusermount3", "-uz", mnt).CombinedOutput(); err != nil {
				log.Error("lazy unmount failed", "err", err, "output", strings.TrimSpace(string(out)))
			}
		}
		<-served
	}
}

// flush uploads every change, reporting progress on stderr at most once a
// second, and then cleans up the staged parts of uploads that a crash or a
// failed cleanup left, until done, timeout, a second signal, or the bucket
// known to be away (br, if not nil: see watchOffline).
func flush(ch *cache.Cache, br *transfer.Breaker, timeout time.Duration, sigs <-chan os.Signal, log *slog.Logger) []string {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var cutBy atomic.Value // the signal that cut the flush short, if one did
	go func() {
		select {
		case s := <-sigs:
			cutBy.Store(s.String())
			log.Warn("flush cut short", "signal", s.String())
			cancel()
		case <-ctx.Done():
		}
	}()
	if st := ch.Stats(); st.DirtyFiles > 0 {
		away := watchOffline(ctx, br, cancel) // offline.go
		defer func() { cancel(); away.wait() }()
		var last time.Time
		left := ch.Flush(ctx, func(p cache.Progress) {
			if time.Since(last) >= time.Second || p.Files == 0 {
				last = time.Now()
				log.Info("flushing changes to the bucket", "files_left", p.Files, "bytes_left", p.Bytes)
				sdNotify(log, fmt.Sprintf("STATUS=flushing changes to the bucket: %d files, %s left", p.Files, FormatSize(p.Bytes)))
			}
		})
		if len(left) > 0 {
			// Say why it stopped: a signal, the timeout, or files held for
			// a failed checksum check (which no wait would send).
			why := []any{"files", left}
			switch {
			case cutBy.Load() != nil:
				why = append(why, "cut_short_by", cutBy.Load())
			case away.cause() != "":
				why = append(why, "reason", "the bucket is unreachable (the next mount sends them)", "cause", away.cause())
			case ctx.Err() != nil:
				why = append(why, "timeout", timeout)
			default:
				why = append(why, "reason", "held (a failed checksum check, or an upload the bucket refused as invalid), or refused by the bucket (see bucketfs status)")
			}
			log.Error("flush did not finish; these files stay dirty in the cache", why...)
			return left
		}
	}
	// Staged parts are no data: they are not worth holding the unmount
	// up for long when the bucket does not answer.
	cctx, ccancel := context.WithTimeout(ctx, cleanAtUnmount)
	defer ccancel()
	if err := ch.CleanStaging(cctx); err != nil {
		log.Warn("cleaning up staged parts at unmount", "err", err)
	}
	return nil
}

// cleanAtUnmount bounds the cleanup of staged parts at unmount.
const cleanAtUnmount = 30 * time.Second

// checkFUSE makes sure the kernel device and the mount helper are there.
func checkFUSE() error {
	if _, err := exec.LookPath("fusermount3"); err != nil {
		return errors.New("fusermount3 not found in PATH: install FUSE 3 (Debian/Ubuntu: apt-get install fuse3)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("/dev/fuse is missing (%v): load the fuse kernel module (modprobe fuse) or, in a container, pass the device in", err)
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("cannot open /dev/fuse: permission denied; FUSE mounts by users other than root need it readable and writable by them (chmod 0666 /dev/fuse, the usual mode)")
	}
	if err != nil {
		return fmt.Errorf("cannot open /dev/fuse: %w", err)
	}
	f.Close()
	return nil
}

// checkMountpoint resolves mp and makes sure nothing is mounted there. A
// file system mounted there is asked with statfs only (see probeMount),
// so that a dead mount is told apart from a live one, and a hung one
// cannot hang the start.
func checkMountpoint(mp string) (string, error) {
	abs, err := mountpointPath(mp)
	if err != nil {
		return "", err
	}
	_, mounted, err := mountinfo.Lookup(abs)
	if err != nil {
		return "", err
	}
	if mounted {
		switch err := probeMount(abs); {
		case errors.Is(err, syscall.ENOTCONN):
			return "", deadMountError(abs)
		case errors.Is(err, errNoAnswer):
			return "", fmt.Errorf("mountpoint %s is busy: the file system mounted there did not answer within %v (a stopped or hung process?); see 'findmnt %s', and unmount it with 'fusermount3 -uz %s'", abs, probeTimeout, abs, abs)
		}
		return "", fmt.Errorf("mountpoint %s is busy: something is already mounted there (see 'findmnt %s'; unmount it with 'fusermount3 -u %s')", abs, abs, abs)
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, syscall.ENOTCONN):
		// A dead mount seen through a link or a bind mount elsewhere.
		return "", deadMountError(abs)
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("mountpoint %s does not exist: create it with 'mkdir -p %s'", abs, abs)
	case err != nil:
		return "", fmt.Errorf("mountpoint %s: %w", abs, err)
	case !st.IsDir():
		return "", fmt.Errorf("mountpoint %s is not a directory", abs)
	}
	return abs, nil
}

// checkBucket asks the bucket once, so that a typo or missing permission
// fails the mount with a clear message instead of failing every file. It
// returns the check's own error too (for startOffline) and the message.
func checkBucket(ctx context.Context, b transfer.Bucket, c *mountConfig) (error, error) {
	ctx, cancel := context.WithTimeout(transfer.QuietOffline(ctx), c.checkTimeout)
	defer cancel()
	err := b.CheckAccess(ctx)
	return err, checkMessage(err, c)
}

// holdsDeletes reads the bucket's retention policy and default
// event-based hold, and says once, at start, what they change: large
// files go up as one resumable upload, since every staged part would be
// kept (and billed) for the retention or until its hold is released.
// A bucket whose attributes cannot be read is taken as holding nothing.
func holdsDeletes(ctx context.Context, gcs *transfer.GCS, c *mountConfig, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(ctx, c.checkTimeout)
	defer cancel()
	r, err := gcs.DeletionRules(ctx)
	if err != nil {
		log.Debug("the bucket's retention policy and holds could not be read; large files go up in parts", "err", err)
		return false
	}
	if !r.HoldsDeletes() {
		return false
	}
	log.Warn("the bucket keeps objects from being deleted (retention policy or default event-based hold): large files are uploaded as one resumable upload each, not in parallel parts, so that no staged copy is held and billed",
		"bucket", c.bucket, "retention", r.Retention, "retention_locked", r.RetentionLocked, "default_event_based_hold", r.DefaultEventBasedHold)
	return true
}

// checkMessage says what a failed start-up check means.
func checkMessage(err error, c *mountConfig) error {
	where := "gs://" + c.bucket
	if c.endpoint != "" {
		where += " at " + c.endpoint
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, transfer.ErrBucketNotExist):
		return fmt.Errorf("bucket %s does not exist (check the name and the project)", where)
	case errors.Is(err, transfer.ErrPermission):
		return fmt.Errorf("access to bucket %s denied (HTTP 403): the credentials lack storage.objects.list on it: %v", where, err)
	case errors.Is(err, transfer.ErrNoToken):
		return fmt.Errorf("credentials for bucket %s gave no access token (on a VM: does it have a service account, with a storage scope? Else set GOOGLE_APPLICATION_CREDENTIALS, or pass --anonymous for a public bucket): %v", where, err)
	case errors.Is(err, transfer.ErrUnauthenticated):
		return fmt.Errorf("credentials for bucket %s missing or refused (HTTP 401): %v", where, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("bucket %s did not answer within %s: check the network and --endpoint", where, c.checkTimeout)
	default:
		return fmt.Errorf("cannot reach bucket %s: %w", where, err)
	}
}

// resumableOption maps --resumable-threshold to transfer.GCSOptions: the
// flag's 0 (never) is the option's negative.
func resumableOption(s Size) int64 {
	if s == 0 {
		return -1
	}
	return int64(s)
}

// stallTimeoutOption maps --stall-timeout to transfer.GCSOptions: the
// flag's 0 (off) is the option's negative.
func stallTimeoutOption(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// wholeMax resolves --prefetch-whole-max: auto is 1/64 of the cache (a
// whole fetch nobody needed wastes at most that), at least one chunk (a
// whole fetch of a single chunk costs nothing more) and at most 256 MiB
// (about 1.3 s at 200 MiB/s: past that, a reader of a footer would wait
// behind, and pay for, much more than it reads).
func wholeMax(c *mountConfig) int64 {
	if c.wholeMax >= 0 {
		return int64(c.wholeMax)
	}
	return max(int64(c.chunkSize), min(int64(c.cacheMax)/64, 256<<20))
}
