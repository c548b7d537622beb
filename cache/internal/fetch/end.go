package fetch

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/bucketfs/bucketfs/cache/internal/report"
	"github.com/bucketfs/bucketfs/transfer"
)

// Ledger is what the end of a download needs of the copy it fills.
// Package cache implements it for one entry. Each method is one critical
// section of the cache's lock (Retired then writes the journal, after
// it), called with no lock held.
type Ledger interface {
	// Ended is told that the background walk of dl has ended. It marks
	// the walk of the entry's fill ended (Fill) and, if dl is to be
	// retired (still the fill's, and no handle holds the entry or dl has
	// every chunk), takes it as the cache takes a download to retire it
	// (Fill.Take, with its hold released and what it fetched absorbed
	// into the record) and returns its file; nil if not.
	Ended(dl *transfer.Download) *os.File

	// Failed notes err, why the walk of the entry's download stopped (a
	// failure, not a cancellation), among the cache's recent errors; a
	// checksum mismatch is counted as one.
	Failed(err error)

	// Retired records what dl, taken from the entry's fill, fetched: its
	// file is synced. Unless the entry was dropped, its chunks are
	// absorbed into the record (unless the copy has local changes: it is
	// complete, whatever its old chunks were), and the record is written
	// to the journal after the critical section; its error is returned.
	Retired(dl *transfer.Download) error

	// Unsynced is told that dl's file, taken from the entry's fill,
	// could not be synced: the chunks absorbed into the record when dl
	// was taken may not be on disk. Unless the entry was dropped or has
	// local changes, none of its copy counts as present or checked any
	// more (it is fetched again), and the record is written so (after
	// the critical section): one written since dl was taken named them.
	// Its error is that write's.
	Unsynced(dl *transfer.Download) error
}

// Walk starts the background walk of fl's download, if it has one not
// started, fetching for why; name is the copy's, for logs. Until the
// walk starts, the download counts as idle (the last release retires
// it). When the walk ends, l is told (Ended), its error logged and noted
// (Failed), and the download retired if Ended took it. Called under the
// owner's lock; the goroutine it starts takes none of its own (fe.WG
// counts it).
func (fe *Fetcher) Walk(fl *Fill, why transfer.FetchReason, l Ledger, name string) {
	dl := fl.dl
	if dl == nil || dl.Started() {
		return
	}
	src, gen := fl.src, fl.gen
	fl.idle = false
	dl.StartFor(why)
	fe.WG.Add(1)
	go func() {
		defer fe.WG.Done()
		<-dl.Idle()
		f := l.Ended(dl)
		if err := dl.Err(); err != nil {
			level := slog.LevelWarn
			if errors.Is(err, transfer.ErrOffline) {
				level = slog.LevelDebug // the breaker said so once; the reader gets EIO
			}
			fe.Log.Log(context.Background(), level, "background download stopped", "object", name, "source", src, "generation", gen, "err", err)
			if !report.IsCancel(err) {
				l.Failed(err)
			}
		}
		if f != nil {
			fe.Retire(l, name, dl, f)
		}
	}()
}

// Retire stops dl, taken from the fill of copy name, syncs and closes
// its file f, and has l record which chunks it holds (Ledger.Retired).
// Only synced chunks are ever recorded as present: if the sync fails,
// nothing is recorded and the copy is fetched again (Ledger.Unsynced).
// Called with no lock.
func (fe *Fetcher) Retire(l Ledger, name string, dl *transfer.Download, f *os.File) {
	dl.Stop()
	syncErr := f.Sync()
	f.Close()
	if syncErr != nil {
		fe.Log.Warn("syncing cache file failed; its chunks will be fetched again", "object", name, "err", syncErr)
		if err := l.Unsynced(dl); err != nil {
			// The journal may still name chunks the disk lacks; each is
			// checked against its sum before it is served (package verify).
			fe.Log.Error("recording that a cache file's chunks are to be fetched again failed", "object", name, "err", err)
		}
		return
	}
	if err := l.Retired(dl); err != nil {
		fe.Log.Warn("recording cached chunks failed", "object", name, "err", err)
	}
}
