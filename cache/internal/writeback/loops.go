package writeback

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/pending"
	"github.com/bucketfs/bucketfs/cache/internal/report"
	"github.com/bucketfs/bucketfs/cache/internal/space"
)

// Ledger is what the loops and the waits need of the cache. Package
// cache implements it. Unless said otherwise, each method is one
// critical section of the cache's lock, taken inside the method; none is
// called with it held.
type Ledger[E any] interface {
	// TakeDue takes the names whose uploads are due now off the queue,
	// marks each in flight and its entry uploading (pending.Queue.TakeDue),
	// and returns when the next one is due (zero: none).
	TakeDue() (due []string, next time.Time)
	// Upload sends name, which TakeDue returned, once and settles the
	// outcome; it takes the lock only for its own critical sections.
	// ctx ends at StopUploads.
	Upload(ctx context.Context, name string)
	// Abandon clears the uploading mark of name's entry, which TakeDue
	// set: StopUploads came before the upload had a slot.
	Abandon(name string)
	// Done records that the transfer of name that TakeDue took is over
	// (pending.Queue.Done), and wakes whoever waits for a change: a
	// successor of the name, or a directory rename, may wait for it.
	Done(name string)

	// SendAll queues every name with changes to be sent now, whatever
	// it was due at, and wakes the uploader and the waiters.
	SendAll()
	// Left counts the names with changes still to send, names them (in
	// no order), counts those of them stuck since since (held, or
	// refused by the bucket since then: no wait sends them), and returns
	// the channel closed at the next change of write-back state.
	Left(since time.Time) (left Progress, names []string, stuck int, wake <-chan struct{})

	// Force starts a FlushName of name: if name has changes to send, it
	// marks them to be sent even while open for writing, queues them to
	// be sent now, wakes the uploader, and returns what Flushed needs
	// (wait true). A name with nothing to send returns wait false and
	// no error; a damaged one, an error (and wait false).
	Force(name string) (f Flushing[E], wait bool, err error)
	// Flushed reports whether f's flush is over: done when an upload
	// that started after Force succeeded (or the entry has no changes
	// left, or was dropped); an error when the entry is damaged, or
	// stuck since f.Since. Otherwise, if no upload of it runs, it marks
	// it forced again and queues it again if it left the queue (a
	// failed try's delay may have let it go). wake is closed at the
	// next change of write-back state.
	Flushed(f Flushing[E]) (done bool, wake <-chan struct{}, err error)

	// Checkpoint applies the journal to the index. It takes no lock of
	// the cache's state (the journal has its own).
	Checkpoint() error
	// CountHidden charges the files open for writing through
	// passthrough their size now. It stats files with no lock held.
	CountHidden()
}

// Flushing is one FlushName's wait, as Force made it and Flushed reads
// it: the package only hands it back.
type Flushing[E any] struct {
	Entry  E
	Name   string
	Since  time.Time // when the flush began: a refusal since then ends it
	Target uint64    // the upload it waits for, counted as the ledger counts them
}

// Loops are the write-back's background loops over one cache, and the
// waits for them. New makes them; Start starts them.
type Loops[E any] struct {
	ledger      Ledger[E]
	parallelism int                    // uploads at once
	online      func() <-chan struct{} // nil: always online
	log         *slog.Logger

	kick        chan struct{} // buffered 1: wakes the uploader
	life        context.Context
	stopUploads context.CancelFunc // ends life: the uploader, its uploads, what Go started
	uploads     sync.WaitGroup     // the uploader, its uploads, what Go started
	stopCheck   chan struct{}      // closed by StopCheckpointer
	checks      sync.WaitGroup     // the checkpointer
}

// New makes the loops over ledger, with parallelism uploads at once (at
// least one), none started while online's channel is open (nil: always
// online; see offline.go). Kick works at once; nothing runs until Start.
func New[E any](ledger Ledger[E], parallelism int, online func() <-chan struct{}, log *slog.Logger) *Loops[E] {
	life, stop := context.WithCancel(context.Background())
	return &Loops[E]{
		ledger: ledger, parallelism: max(parallelism, 1), online: online, log: log,
		kick: make(chan struct{}, 1), life: life, stopUploads: stop, stopCheck: make(chan struct{}),
	}
}

// Start starts the checkpointer and the uploader.
func (l *Loops[E]) Start() {
	l.checks.Add(1)
	go l.checkpointer()
	l.uploads.Add(1)
	go l.uploader()
}

// Go runs f in a goroutine of its own, with the uploader's life: ctx
// ends at StopUploads, which waits for f to return.
func (l *Loops[E]) Go(f func(ctx context.Context)) {
	l.uploads.Add(1)
	go func() {
		defer l.uploads.Done()
		f(l.life)
	}()
}

// Kick wakes the uploader to scan the queue again. It never blocks: a
// kick already pending stands for this one too.
func (l *Loops[E]) Kick() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// StopUploads ends the uploader's life and waits for the uploader, its
// uploads and what Go started. Uploads still running are cancelled:
// their files stay dirty.
func (l *Loops[E]) StopUploads() {
	l.stopUploads()
	l.uploads.Wait()
}

// StopCheckpointer stops the checkpointer and waits for it. Call it
// once.
func (l *Loops[E]) StopCheckpointer() {
	close(l.stopCheck)
	l.checks.Wait()
}

// uploader is the loop that starts due uploads, until the uploader's
// life ends.
func (l *Loops[E]) uploader() {
	defer l.uploads.Done()
	sem := make(chan struct{}, l.parallelism)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if !l.waitOnline() { // offline.go
			return
		}
		due, next := l.ledger.TakeDue()
		for _, name := range due {
			l.uploads.Add(1)
			go l.send(sem, name)
		}
		wait := pending.Idle
		if !next.IsZero() {
			wait = time.Until(next)
		}
		timer.Reset(wait)
		select {
		case <-l.life.Done():
			return
		case <-l.kick:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// send runs the upload of name once a slot of sem is free, and ends it.
func (l *Loops[E]) send(sem chan struct{}, name string) {
	defer l.uploads.Done()
	defer l.ledger.Done(name)
	select {
	case sem <- struct{}{}:
		defer func() { <-sem }()
		l.ledger.Upload(l.life, name)
	case <-l.life.Done():
		l.ledger.Abandon(name)
	}
}

// checkpointer applies the journal to the index every
// durable.CheckpointEvery, and counts the hidden writers every
// space.HiddenEvery, until StopCheckpointer.
func (l *Loops[E]) checkpointer() {
	defer l.checks.Done()
	t := time.NewTicker(durable.CheckpointEvery)
	defer t.Stop()
	hidden := time.NewTicker(space.HiddenEvery)
	defer hidden.Stop()
	warn := report.NewRepeatLimit(time.Minute)
	for {
		select {
		case <-l.stopCheck:
			return
		case <-hidden.C:
			l.ledger.CountHidden() // passthrough writers' growth
			continue
		case <-t.C:
		}
		if err := l.ledger.Checkpoint(); err != nil {
			warn.Failed(l.log, "applying the cache journal to the index failed; retrying", err)
		} else {
			warn.Succeeded(l.log, "applying the cache journal to the index works again")
		}
	}
}
