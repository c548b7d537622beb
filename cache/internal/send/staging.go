package send

import (
	"context"
	"fmt"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	bolt "go.etcd.io/bbolt"
)

// Large files go up in parts (Options.Large). A parallel upload stages its
// parts in the bucket under a prefix of its own before it puts the whole
// into place; the prefix is recorded in the index before the first part
// leaves, and forgotten only once everything under it is gone. A crash in
// between leaves the record, and the next start cleans up (aborts the
// multipart upload, deletes the staged objects).

// Index is where the staging prefixes of parallel uploads are recorded,
// each change durably before it returns: the cache index (BoltIndex).
type Index interface {
	PutStaging(staging, object string) error
	DeleteStaging(staging string) error
	// LoadStaging returns every prefix recorded; an unreadable record
	// still names its prefix.
	LoadStaging() (map[string]durable.Staging, error)
}

// BoltIndex is the Index kept in the staging/ bucket of the cache index
// db (durable.PutStaging and the like: synced commits).
func BoltIndex(db *bolt.DB) Index { return boltIndex{db} }

type boltIndex struct{ db *bolt.DB }

func (x boltIndex) PutStaging(staging, object string) error {
	return durable.PutStaging(x.db, staging, object)
}

func (x boltIndex) DeleteStaging(staging string) error {
	return durable.DeleteStaging(x.db, staging)
}

func (x boltIndex) LoadStaging() (map[string]durable.Staging, error) {
	return durable.LoadStaging(x.db)
}

// recordStaging notes staging in the index (a synced commit).
func (s *Sender) recordStaging(staging, object string) error {
	if err := s.index.PutStaging(staging, object); err != nil {
		return fmt.Errorf("recording the staging prefix of an upload in the cache index: %w", err)
	}
	return nil
}

// cleanStaging removes what an upload staged, and then its record. On
// failure the record stays, and the cleaner tries again later.
func (s *Sender) cleanStaging(ctx context.Context, staging string) {
	err := s.large.Clean(ctx, staging)
	if err == nil {
		err = s.index.DeleteStaging(staging)
	}
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("cleaning up the parts of an upload failed; trying again later", "staging", staging, "err", err)
			s.kickCleaner()
		}
	}
}

// kickCleaner wakes the cleaner without waiting.
func (s *Sender) kickCleaner() {
	select {
	case s.cleanKick <- struct{}{}:
	default:
	}
}

// cleanerRetry is how long the cleaner waits after a failed round.
const cleanerRetry = time.Minute

// RunCleaner is the loop that cleans up the staging prefixes left in the
// index: by a crash (at once: those of the last run) or by a cleanup
// that failed. It returns when life ends, at once without a
// LargeUploader. The caller runs it in a goroutine of its own and waits
// for it before it closes the index.
func (s *Sender) RunCleaner(life context.Context) {
	if s.large == nil {
		return
	}
	s.kickCleaner() // prefixes left by the last run
	for {
		select {
		case <-life.Done():
			return
		case <-s.cleanKick:
		}
		if s.cleanRound(life) > 0 {
			t := time.NewTimer(cleanerRetry)
			select {
			case <-life.Done():
				t.Stop()
				return
			case <-t.C:
				s.kickCleaner()
			}
		}
	}
}

// CleanStaging cleans up now, within ctx, the staging prefixes that no
// running upload owns (left by a crash, or by a cleanup that failed and
// waits for its retry), rather than leaving them to the cleaner.
func (s *Sender) CleanStaging(ctx context.Context) error {
	if s.large == nil {
		return nil
	}
	if n := s.cleanRound(ctx); n > 0 {
		return fmt.Errorf("%d uploads' staged parts are not cleaned up; the next start tries again", n)
	}
	return nil
}

// cleanRound cleans every staging prefix in the index that no upload of
// this run owns, and returns how many are left.
func (s *Sender) cleanRound(ctx context.Context) int {
	s.cleanMu.Lock() // the cleaner and CleanStaging
	defer s.cleanMu.Unlock()
	recs, err := s.index.LoadStaging() // an unreadable note still names its prefix
	if err != nil {
		s.log.Warn("reading the staging prefixes from the cache index failed", "err", err)
		return max(len(recs), 1)
	}
	left := 0
	for staging, r := range recs {
		if s.isLive(staging) {
			continue // a running upload's: it cleans up after itself
		}
		if err := s.large.Clean(ctx, staging); err != nil {
			if ctx.Err() == nil {
				s.log.Warn("cleaning up the parts of an interrupted upload failed; trying again later", "staging", staging, "object", r.Object, "err", err)
			}
			left++
			continue
		}
		if err := s.index.DeleteStaging(staging); err != nil {
			// The parts are gone; the note stays, and the next round
			// cleans the (now empty) prefix and tries the note again.
			s.log.Warn("removing a cleaned-up upload's note from the cache index failed; trying again later", "staging", staging, "object", r.Object, "err", err)
			left++
			continue
		}
		s.log.Info("cleaned up the parts of an interrupted upload", "staging", staging, "object", r.Object)
	}
	return left
}
