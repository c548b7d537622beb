package verify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/recovery"
	"github.com/bucketfs/bucketfs/transfer"
)

// SyncMax is the largest copy whose chunks are checked at open, before
// the open returns (about 10 ms of disk reading); a larger copy is
// checked in the background (Checker.SyncMax; tests lower it).
const SyncMax = 16 << 20

// Wait bounds how long an open waits for the background check of a
// large copy before it reads through the daemon, checking as it goes
// (Checker.Wait).
const Wait = time.Second

// Stater is the part of the bucket a resolve asks what a name shows
// (transfer.Bucket's Stat).
type Stater interface {
	Stat(ctx context.Context, name string) (transfer.ObjectAttrs, error)
}

// A Checker checks the copies of one cache.
type Checker struct {
	SyncMax int64         // copies up to this size are checked at open, larger ones in the background
	Wait    time.Duration // how long an open waits for a background check
	Dir     string        // the cache directory (lost+found is under it)
	DataDir string        // its data files
	Bucket  Stater
	Log     *slog.Logger
	Closing <-chan struct{} // closed when the cache closes: background checks stop
	WG      *sync.WaitGroup // counts the background checks running (Ledger.StartCheck adds)

	slot chan struct{} // one background check at a time
}

// New returns k, ready, with its slot.
func New(k Checker) *Checker {
	k.slot = make(chan struct{}, 1)
	return &k
}

// AtOpen checks l's clean, complete copy before a handle reads it (the
// size always, every chunk if it is small), so that a passthrough handle
// is given only checked bytes; f is the copy's file. A larger copy not
// yet checked is checked in the background, and the open waits for that
// up to Wait (at disk speed, about a GiB); it reports whether the check
// is still under way (the handle must then check what it reads itself).
func (k *Checker) AtOpen(l Ledger, f *os.File) (pending bool) {
	k.size(l, f)
	s := l.State()
	if !s.Complete || s.Downloading || s.AllChecked {
		return false
	}
	if s.Size <= k.SyncMax {
		Chunks(l, f, 0, s.Chunks-1)
		return false
	}
	select {
	case <-k.start(l):
	case <-time.After(k.Wait):
	}
	s = l.State()
	return !s.AllChecked && s.Complete
}

// size compares the size of l's clean, complete copy with its record
// and, if the file was cut short or grown behind the cache's back, drops
// the whole copy (it is fetched again). f is the copy's file.
func (k *Checker) size(l Ledger, f *os.File) {
	st, err := f.Stat()
	if err != nil {
		return
	}
	s := l.State()
	if !s.Clean || !s.Complete || s.Downloading || st.Size() == s.Size || s.Writing {
		return
	}
	bad := make([]int, s.Chunks)
	for i := range bad {
		bad[i] = i
	}
	// Back to the size the record says, so that chunks land where they
	// belong; what it held is fetched again.
	if err := f.Truncate(s.Size); err != nil {
		k.Log.Warn("resizing a damaged cache file failed", "object", s.Name, "err", err)
	}
	l.Drop(bad, fmt.Errorf("the cache file has %d bytes, its record says %d (the file is %s)", st.Size(), s.Size, recovery.ShorterOrLonger(st.Size(), s.Size)))
}

// start checks every chunk of l's copy in the background, one copy at a
// time, the entry held (Ledger.StartCheck) while it runs. The channel it
// returns is closed when the check ends.
func (k *Checker) start(l Ledger) <-chan struct{} {
	done := make(chan struct{})
	running, name, id, n := l.StartCheck(done)
	if running == nil {
		close(done)
		return done
	}
	if running != done {
		return running
	}
	go func() {
		defer k.WG.Done() // Added by StartCheck
		defer func() {
			l.EndCheck()
			close(done)
			l.Release()
		}()
		select {
		case k.slot <- struct{}{}:
			defer func() { <-k.slot }()
		case <-k.Closing:
			return
		}
		f, err := os.Open(durable.DataPath(k.DataDir, id))
		if err != nil {
			return
		}
		defer f.Close()
		start := time.Now()
		for i := 0; i < n; i++ {
			select {
			case <-k.Closing:
				return
			default:
			}
			Chunks(l, f, i, i)
		}
		k.Log.Debug("cached copy checked", "object", name, "chunks", n, "took", time.Since(start))
	}()
	return done
}

// BeforeWrite refuses a held file, and checks every chunk of a clean
// copy about to be changed (unless it is emptied first: trunc): a change
// must never be based on bytes the bucket's version does not have. Bad
// chunks are dropped, so that the open for writing fetches them again.
func (k *Checker) BeforeWrite(l Ledger, trunc bool) error {
	s := l.State()
	if s.Held != "" {
		return Damaged(s.Name, s.Held)
	}
	if trunc || !s.Clean || !s.Complete || s.Downloading || s.AllChecked {
		return nil
	}
	f, err := os.Open(durable.DataPath(k.DataDir, s.ID))
	if err != nil {
		return fmt.Errorf("opening cache file: %w", err)
	}
	defer f.Close()
	k.size(l, f)
	Chunks(l, f, 0, s.Chunks-1)
	return nil
}

// TakeBucket ends the hold on name, l's held file, with the bucket's
// version: the local bytes (data file id, the entry at version, as
// Resolve saw them) are kept in lost+found under Dir, whose path it
// returns, and then the entry is dropped (Ledger.DropHeld), unless it
// changed meanwhile. What the name shows now is the bucket's.
func (k *Checker) TakeBucket(ctx context.Context, l Ledger, name string, id, version uint64) (string, error) {
	saved, err := recovery.SaveLost(k.Dir, name, id)
	if err != nil {
		return "", fmt.Errorf("keeping the local bytes of %s before dropping them: %w", name, err)
	}
	if !l.DropHeld(name, id, version) {
		return saved, fmt.Errorf("%s changed meanwhile; nothing dropped (its bytes are also in %s)", name, saved)
	}
	k.Log.Warn("a held file takes the bucket's version; its local bytes are kept in lost+found", "object", name, "saved_as", saved)
	if a, err := k.Bucket.Stat(ctx, name); err == nil {
		l.Confirm(name, a, false)
	} else if errors.Is(err, transfer.ErrNotExist) {
		l.Confirm(name, transfer.ObjectAttrs{}, true)
	}
	return saved, nil
}
