package send

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/transfer"
)

// LargeUploader sends a big file in parts; transfer.Parallel implements
// it (the contracts are on its methods).
type LargeUploader interface {
	Put(ctx context.Context, name string, r io.ReaderAt, size int64, o transfer.PutOptions, staging string) (transfer.ObjectAttrs, error)
	Clean(ctx context.Context, staging string) error
}

// Options are what a Sender is made of: plain values of its caller's.
type Options struct {
	Bucket transfer.Bucket
	// Large, if set, sends files of LargeThreshold bytes or more in parts.
	Large          LargeUploader
	LargeThreshold int64
	// Index records the staging prefixes of parallel uploads (BoltIndex);
	// needed only with Large.
	Index   Index
	DataDir string // the data files, named by durable.DataPath
	Logger  *slog.Logger
}

// Sender writes the content of cached files in the bucket, and cleans up
// after the parallel uploads that a crash or a failure interrupted.
type Sender struct {
	b         transfer.Bucket
	large     LargeUploader
	threshold int64
	index     Index
	dataDir   string
	log       *slog.Logger

	cleanKick chan struct{} // buffered 1: wakes the cleaner (staging.go)
	cleanMu   sync.Mutex    // one cleaning round at a time (staging.go)

	mu   sync.Mutex      // guards live; a leaf
	live map[string]bool // staging prefixes of running uploads
}

// New returns a Sender of o. Its cleaner does not run until RunCleaner.
func New(o Options) *Sender {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Sender{
		b: o.Bucket, large: o.Large, threshold: o.LargeThreshold,
		index: o.Index, dataDir: o.DataDir, log: o.Logger,
		cleanKick: make(chan struct{}, 1),
		live:      map[string]bool{},
	}
}

// Source is where an upload's content comes from: the cache file, or
// (From not empty) a server-side copy of generation Gen of object From.
type Source struct {
	From string
	Gen  int64
}

// Send writes name's content in the bucket under o: the data file id
// (size bytes), or a copy of src. It does network and disk I/O: the
// caller holds none of its own locks.
func (s *Sender) Send(ctx context.Context, name string, id uint64, size int64, src Source, o transfer.PutOptions) (transfer.ObjectAttrs, error) {
	if src.From != "" {
		return s.b.Copy(ctx, src.From, src.Gen, name, o)
	}
	return s.putObject(ctx, name, id, size, o)
}

// putObject uploads size bytes of data file id as name: in parts if the
// file is large and a LargeUploader is configured, else in one request.
func (s *Sender) putObject(ctx context.Context, name string, id uint64, size int64, o transfer.PutOptions) (transfer.ObjectAttrs, error) {
	if s.large == nil || size < s.threshold {
		return s.putFile(ctx, name, id, size, o)
	}
	f, err := os.Open(durable.DataPath(s.dataDir, id))
	if err != nil {
		return transfer.ObjectAttrs{}, fmt.Errorf("opening cache file: %w", err)
	}
	defer f.Close()
	staging := transfer.NewStaging()
	s.setLive(staging, true)
	defer s.setLive(staging, false)
	if err := s.recordStaging(staging, name); err != nil {
		return transfer.ObjectAttrs{}, err
	}
	a, err := s.large.Put(ctx, name, f, size, o, staging)
	s.cleanStaging(ctx, staging)
	return a, err
}

// putFile uploads size bytes of data file id as name in one request.
func (s *Sender) putFile(ctx context.Context, name string, id uint64, size int64, o transfer.PutOptions) (transfer.ObjectAttrs, error) {
	f, err := os.Open(durable.DataPath(s.dataDir, id))
	if err != nil {
		return transfer.ObjectAttrs{}, fmt.Errorf("opening cache file: %w", err)
	}
	defer f.Close()
	return s.b.Put(ctx, name, io.NewSectionReader(f, 0, size), o)
}

// setLive marks staging as a running upload's (on), or no longer (off).
func (s *Sender) setLive(staging string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.live[staging] = true
	} else {
		delete(s.live, staging)
	}
}

// isLive reports whether staging is a running upload's.
func (s *Sender) isLive(staging string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[staging]
}
