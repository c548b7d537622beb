package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"

	"github.com/bucketfs/bucketfs/internal/crc32c"
)

// DownloadOptions shape a Download.
type DownloadOptions struct {
	ChunkSize   int64 // the unit of presence and checksums; > 0
	Parallelism int   // background range requests in flight; >= 1
	// MinRange, if > 0, lets one chunk's fetch be split into range
	// requests at once, of MinRange bytes at least (up to twice that),
	// when the object has fewer chunks than Parallelism: a medium
	// object (8 MiB, one chunk) then comes over as many connections as
	// a big one. 0: one request per chunk.
	MinRange int64
	// Sums are the CRC-32C checksums of the chunks dst holds already
	// (indexed as present); a present chunk without one leaves the
	// object unchecked at the end.
	Sums []uint32
	// CRC32C, with CheckCRC, is the object's checksum as the store
	// reports it. Once every chunk is present, their checksums are
	// combined and compared with it: a mismatch ends the download with
	// an error matching ErrChecksum, and no chunk counts as present any
	// more. An object of one chunk is checked before any reader sees
	// its bytes, and fetched once more on a mismatch.
	CRC32C   uint32
	CheckCRC bool
	// StoredBytes reads an object stored with a Content-Encoding as it is
	// stored (see transfer.StoredBytes).
	StoredBytes bool
	// Logger, if set, is told about a failed fetch a reader retried
	// (Ensure); nil logs nothing.
	Logger *slog.Logger
	// Priority, shared by the downloads of a mount, puts the fetches
	// readers wait for first (priority.go); nil: no order.
	Priority *Priority
	// OnFetched, if set, is told about the bytes fetched, as they land,
	// with the reason they were fetched for. Called by many goroutines
	// at once; it must be quick.
	OnFetched func(r FetchReason, n int64)
}

// Download fetches one version of an object into dst in chunks of
// ChunkSize, each by one request, or by a few at once (sub-ranges of at
// least MinRange bytes) when the object has fewer chunks than it may
// have requests in flight. Background workers walk the object from the start with
// Parallelism requests in flight, once started (Start); Ensure fetches
// the chunks a reader needs at once, ahead of the walk, and Readahead
// those a reader will need. A chunk is fetched by one request at a time:
// concurrent Ensure calls for the same chunk share it. With a Priority,
// the fetches readers wait for go first (priority.go).
//
// Chunk i covers [i*ChunkSize, min((i+1)*ChunkSize, size)). dst receives
// each chunk's bytes with WriteAt before the chunk counts as present; a
// failed fetch may leave partial bytes there, in a chunk that is still
// absent. The CRC-32C of every chunk is computed as its bytes stream in
// (Sums), so that the object can be checked as a whole at the end (see
// DownloadOptions.CheckCRC) and its copy later, chunk by chunk.
type Download struct {
	b     Bucket
	name  string
	gen   int64
	size  int64
	chunk int64
	par   int
	minRq int64 // DownloadOptions.MinRange
	dst   io.WriterAt
	crc   uint32 // the object's, if check
	check bool
	log   *slog.Logger // nil: none
	prio  *Priority    // nil: no order
	onGot func(FetchReason, int64)

	// life is the download's own lifetime (not a request's): Stop cancels
	// it. Fetches started by Ensure run under it, so that one reader giving
	// up does not fail the others waiting for the same chunk.
	life   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // every fetch goroutine and worker

	idle     chan struct{} // closed when the background workers have exited
	complete chan struct{} // closed when every chunk is present

	mu        sync.Mutex
	chunks    []chunkState // guarded by mu
	next      int          // guarded by mu: where the background walk goes on
	remaining int          // guarded by mu: chunks not yet present
	fetching  int          // guarded by mu: chunks with a request in flight
	bgErr     error        // guarded by mu: first background failure
	broken    error        // guarded by mu: the whole object failed its check; nothing is served
	started   bool         // guarded by mu
	walkWhy   FetchReason  // guarded by mu: the walk's reason, and EnsureComplete's
}

type chunkState struct {
	present bool
	summed  bool     // sum is the chunk's CRC-32C
	sum     uint32   // valid if summed
	fetch   *attempt // non-nil while a request for the chunk is in flight
}

// attempt is one fetch of one chunk (by one request, or by several at
// once, each a part of it); err is set before done is closed. While it
// runs, written counts the bytes from the chunk's start that dst already
// holds, so that a reader waits only for the bytes it needs, not for the
// whole chunk.
type attempt struct {
	done chan struct{}
	err  error
	why  FetchReason // what it was claimed for

	written   int64          // guarded by Download.mu
	parts     []partProgress // guarded by Download.mu: how far each part got, if in parts
	moved     chan struct{}  // guarded by Download.mu: closed (and replaced) when written grows
	wanted    chan struct{}  // closed (under Download.mu) when a reader first waits for it
	heard     chan struct{}  // closed when the first bytes of the body came (heardOnce)
	heardOnce atomic.Bool
	waited    atomic.Bool // wanted is closed; set under Download.mu
}

// partProgress is one part of an attempt: its length, and the bytes of
// it written so far.
type partProgress struct{ len, n int64 }

// wantLocked marks a as waited for by a reader; d.mu is held.
func (a *attempt) wantLocked() {
	if !a.waited.Load() {
		a.waited.Store(true)
		close(a.wanted)
	}
}

// NewDownload prepares a download of generation gen of object name, whose
// size is size. present reports the chunks dst already holds (nil: none).
// Nothing is fetched until Start or Ensure.
func NewDownload(b Bucket, name string, gen, size int64, dst io.WriterAt, present []bool, o DownloadOptions) *Download {
	if o.ChunkSize <= 0 {
		o.ChunkSize = 8 << 20
	}
	if o.Parallelism < 1 {
		o.Parallelism = 1
	}
	n := int((size + o.ChunkSize - 1) / o.ChunkSize)
	d := &Download{
		b: b, name: name, gen: gen, size: size, chunk: o.ChunkSize, par: o.Parallelism, minRq: o.MinRange, dst: dst,
		crc: o.CRC32C, check: o.CheckCRC, log: o.Logger, prio: o.Priority, onGot: o.OnFetched,
		walkWhy:  FetchWhole,
		idle:     make(chan struct{}),
		complete: make(chan struct{}),
		chunks:   make([]chunkState, n),
	}
	d.life, d.cancel = context.WithCancel(context.Background())
	if o.StoredBytes {
		d.life = StoredBytes(d.life)
	}
	for i := range d.chunks {
		if i < len(present) && present[i] {
			d.chunks[i].present = true
			if i < len(o.Sums) {
				d.chunks[i].sum, d.chunks[i].summed = o.Sums[i], true
			}
		} else {
			d.remaining++
		}
	}
	if d.remaining == 0 {
		close(d.complete)
	}
	return d
}

// NumChunks is the number of chunks of the object.
func (d *Download) NumChunks() int { return len(d.chunks) }

// Start launches the background walk, fetching for FetchWhole. It
// returns at once; Idle is closed when the walk ends (all chunks present,
// a failure, or Stop).
func (d *Download) Start() { d.StartFor(FetchWhole) }

// StartFor is Start with the walk's chunks (and EnsureComplete's)
// counted for reason why. A download already started keeps its reason.
func (d *Download) StartFor(why FetchReason) {
	d.mu.Lock()
	if d.started {
		d.mu.Unlock()
		return
	}
	d.started, d.walkWhy = true, why
	d.mu.Unlock()
	var workers sync.WaitGroup
	for range d.par {
		workers.Add(1)
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer workers.Done()
			d.walk()
		}()
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		workers.Wait()
		close(d.idle)
	}()
}

// Started reports whether the background walk was started.
func (d *Download) Started() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.started
}

// walk fetches unclaimed chunks in order until none is left or one fails.
// It claims no chunk while a reader waits (Priority).
func (d *Download) walk() {
	bg := pauser{p: d.prio}
	for {
		bg.pause(d.life, nil)
		i, a := d.claimNext()
		if a == nil {
			return
		}
		if err := d.fetch(i, a); err != nil {
			d.mu.Lock()
			if d.bgErr == nil {
				d.bgErr = err
			}
			d.mu.Unlock()
			return
		}
	}
}

func (d *Download) claimNext() (int, *attempt) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bgErr != nil || d.broken != nil || d.life.Err() != nil {
		return -1, nil
	}
	for ; d.next < len(d.chunks); d.next++ {
		c := &d.chunks[d.next]
		if !c.present && c.fetch == nil {
			return d.next, d.claimLocked(d.next, d.walkWhy)
		}
	}
	return -1, nil
}

func (d *Download) claimLocked(i int, why FetchReason) *attempt {
	a := &attempt{done: make(chan struct{}), moved: make(chan struct{}), wanted: make(chan struct{}), heard: make(chan struct{}), why: why}
	if why == FetchRead {
		a.wantLocked()
	}
	d.chunks[i].fetch = a
	d.fetching++
	return a
}

// fetch runs one claimed attempt to its end and publishes the outcome.
func (d *Download) fetch(i int, a *attempt) error {
	off := int64(i) * d.chunk
	n := min(d.chunk, d.size-off)
	sum, err := d.read(a, off, n)
	if err == nil && d.verifiesFirst() && sum != d.crc {
		// The whole object in one chunk: no reader has seen the bytes
		// yet (waitFor waits for the end); one more try before failing.
		sum, err = d.read(a, off, n)
		if err == nil && sum != d.crc {
			err = d.mismatch(sum)
		}
	}

	d.mu.Lock()
	if errors.Is(err, ErrChecksum) {
		d.broken = err // twice wrong: nothing more is fetched or served
	}
	c := &d.chunks[i]
	c.fetch = nil
	d.fetching--
	if err == nil {
		c.present, c.summed, c.sum = true, true, sum
		d.remaining--
		if d.remaining == 0 {
			if werr := d.checkWholeLocked(); werr != nil {
				err = werr
			} else {
				close(d.complete)
			}
		}
	}
	d.mu.Unlock()
	a.err = err
	close(a.done)
	return err
}

// verifiesFirst reports whether the object is one chunk checked before
// its bytes are shown.
func (d *Download) verifiesFirst() bool { return d.check && len(d.chunks) == 1 }

func (d *Download) mismatch(got uint32) error {
	return fmt.Errorf("gs://%s/%s#%d: the bytes read have CRC32C %08x, the object's is %08x: %w", d.b.Name(), d.name, d.gen, got, d.crc, ErrChecksum)
}

// checkWholeLocked compares the combined checksum of every chunk with
// the object's, once all are present. On a mismatch (of an object of
// several chunks: readers have seen its bytes) no chunk counts as present
// any more and the download is broken: nothing more is served from it.
func (d *Download) checkWholeLocked() error {
	if !d.check || d.verifiesFirst() {
		return nil
	}
	var sum uint32
	for i, c := range d.chunks {
		if !c.summed {
			return nil // chunks from before whose sums are unknown: cannot tell
		}
		sum = crc32c.Combine(sum, c.sum, min(d.chunk, d.size-int64(i)*d.chunk))
	}
	if sum == d.crc {
		return nil
	}
	err := d.mismatch(sum)
	for i := range d.chunks {
		d.chunks[i].present, d.chunks[i].summed = false, false
	}
	d.remaining = len(d.chunks)
	d.broken = err
	if d.bgErr == nil {
		d.bgErr = err
	}
	return err
}

// Ensure returns when dst holds the bytes [off, off+length), fetching the
// chunks they are in at once if no request for them runs yet (ahead of the
// background walk), or with the error of a fetch it waited for, or ctx's
// error. It waits only for the bytes it needs: a chunk being fetched is
// written in order, and Ensure returns as soon as its part has landed.
func (d *Download) Ensure(ctx context.Context, off, length int64) error {
	return d.ensure(ctx, off, length, ensureRead)
}

// EnsureBegun starts the fetch of the chunk at off, as Ensure would, and
// returns once the bucket answers it with bytes (or the byte at off is
// present): that tells that the version is in the bucket. It waits
// neither for the byte to land nor for the check of an object checked
// whole before its bytes are shown, and shows no byte to anyone: an
// open's check (cache's Handle.Check), so that opening a medium object
// does not wait for all of it.
func (d *Download) EnsureBegun(ctx context.Context, off int64) error {
	return d.ensure(ctx, off, 1, ensureBegun)
}

// EnsureInOrder is Ensure for a reader reading the object in order: its
// wait does not hold back the background fetches (Priority), since the
// walk ahead of it is what it reads next.
func (d *Download) EnsureInOrder(ctx context.Context, off, length int64) error {
	return d.ensure(ctx, off, length, ensureInOrder)
}

// ensureMode is how a reader waits.
type ensureMode int

const (
	ensureRead    ensureMode = iota // for its bytes, first (Priority)
	ensureInOrder                   // for its bytes, beside the walk ahead of it
	ensureWhole                     // for the fetches' ends, as a walk done at once
	ensureBegun                     // for the bucket to answer with bytes (EnsureBegun)
)

// EnsureComplete returns when every chunk is present and the object has
// passed its check (DownloadOptions.CheckCRC), fetching what is missing
// at once; or with the error of a fetch it waited for, or ctx's. Unlike
// Ensure, it waits for the fetches to end, not for their bytes.
func (d *Download) EnsureComplete(ctx context.Context) error {
	if err := d.ensure(ctx, 0, d.size, ensureWhole); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.broken != nil:
		return d.broken
	case d.remaining > 0:
		return fmt.Errorf("gs://%s/%s#%d: %d chunks are still missing after their fetch", d.b.Name(), d.name, d.gen, d.remaining)
	}
	return nil
}

// ensure fetches (or waits for) the chunks of [off, off+length). A fetch
// it waited for that failed for a reason a new request may not meet (a
// broken stream, a short body, a stall, a server error) is tried once
// more for this reader before its error is returned: the fetch may have
// been a background one, and a reader that got its bytes on the second
// try has seen no error, so none is reported as one (a warning says what
// was retried).
func (d *Download) ensure(ctx context.Context, off, length int64, mode ensureMode) error {
	err := d.ensureOnce(ctx, off, length, mode)
	if err == nil || !d.retryable(ctx, err) {
		return err
	}
	if err2 := d.ensureOnce(ctx, off, length, mode); err2 != nil {
		return err2
	}
	if d.log != nil {
		d.log.Warn("a range read failed; retried, and the reader got its bytes", "object", d.name, "generation", d.gen, "offset", off, "err", err)
	}
	return nil
}

// retryable reports whether a fetch's error err is worth one more try
// for a reader: not when the version is gone, the bytes failed their
// checksum (a download never serves such bytes), the bucket refused us, or
// the reader or the download gave up.
func (d *Download) retryable(ctx context.Context, err error) bool {
	switch {
	case ctx.Err() != nil, d.life.Err() != nil:
		return false
	case errors.Is(err, ErrNotExist), errors.Is(err, ErrChecksum), errors.Is(err, ErrPermission),
		errors.Is(err, ErrUnauthenticated), errors.Is(err, ErrBucketNotExist):
		return false
	}
	return true
}

func (d *Download) ensureOnce(ctx context.Context, off, length int64, mode ensureMode) error {
	whole := mode == ensureWhole
	if length <= 0 || off >= d.size {
		return nil
	}
	first := int(off / d.chunk)
	last := int(min(off+length, d.size)-1) / int(d.chunk)
	type wait struct {
		a    *attempt
		need int64 // bytes from the chunk's start the read needs
	}
	var waits []wait
	end := min(off+length, d.size)
	d.mu.Lock()
	if d.broken != nil {
		d.mu.Unlock()
		return d.broken
	}
	why := FetchRead
	if whole {
		why = d.walkWhy // a walk's, done at once (warm): it waits for no reader
	}
	for i := first; i <= last; i++ {
		c := &d.chunks[i]
		need := min(end-int64(i)*d.chunk, d.chunk)
		switch {
		case c.present:
		case c.fetch != nil:
			if !whole {
				c.fetch.wantLocked() // foreground from now on: it pauses no more
			}
			waits = append(waits, wait{c.fetch, need})
		default:
			waits = append(waits, wait{d.goFetchLocked(i, why), need})
		}
	}
	d.mu.Unlock()
	if (mode == ensureRead || mode == ensureBegun) && len(waits) > 0 {
		defer d.prio.enter()()
	}
	for _, w := range waits {
		need := w.need
		if whole {
			need = math.MaxInt64 // until the fetch ends
		}
		if mode == ensureBegun {
			if err := d.waitHeard(ctx, w.a); err != nil {
				return err
			}
			continue
		}
		if err := d.waitFor(ctx, w.a, need, d.verifiesFirst()); err != nil {
			return err
		}
	}
	return nil
}

// goFetchLocked claims chunk i for why and fetches it on a goroutine of
// its own.
func (d *Download) goFetchLocked(i int, why FetchReason) *attempt {
	a := d.claimLocked(i, why)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.fetch(i, a)
	}()
	return a
}

// Readahead starts fetching the chunks of [off, off+length) that are
// neither present nor being fetched, for FetchReadahead, and returns at
// once. They yield to readers' fetches until a reader waits for them.
func (d *Download) Readahead(off, length int64) {
	if length <= 0 || off >= d.size {
		return
	}
	first := int(off / d.chunk)
	last := int((min(off+length, d.size) - 1) / d.chunk)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.broken != nil || d.life.Err() != nil {
		return
	}
	for i := first; i <= last; i++ {
		if c := &d.chunks[i]; !c.present && c.fetch == nil {
			d.goFetchLocked(i, FetchReadahead)
		}
	}
}

// waitHeard returns once the bucket answers attempt a with bytes, or a
// ended: with its error if it failed before that.
func (d *Download) waitHeard(ctx context.Context, a *attempt) error {
	select {
	case <-a.heard:
		return nil
	case <-a.done:
		return a.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitFor returns once attempt a has written the first need bytes of its
// chunk (or, if untilDone, has ended), or ended: with its error if it
// failed before that.
func (d *Download) waitFor(ctx context.Context, a *attempt, need int64, untilDone bool) error {
	for {
		d.mu.Lock()
		written, moved := a.written, a.moved
		d.mu.Unlock()
		if written >= need && !untilDone {
			return nil
		}
		select {
		case <-a.done:
			if a.err != nil {
				return a.err
			}
			return nil
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Complete is closed once every chunk is present.
func (d *Download) Complete() <-chan struct{} { return d.complete }

// Idle is closed when the background walk has ended. It is never closed if
// Start was not called.
func (d *Download) Idle() <-chan struct{} { return d.idle }

// Err returns the failure that ended the background walk early, if any.
func (d *Download) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.bgErr
}

// Probe tells whether the version is still in the bucket, by reading its
// first byte (not kept): ErrNotExist if it is gone. For a download that
// has fetched nothing and will fetch what is read, it is a check that
// costs a round trip and no more.
func (d *Download) Probe(ctx context.Context) error {
	got, err := d.b.ReadRange(Foreground(ctx), d.name, d.gen, 0, min(1, d.size), io.Discard)
	if d.onGot != nil && got > 0 {
		d.onGot(FetchRead, got)
	}
	return err
}

// Covered returns how many chunks are present or being fetched, of how
// many: what the reads so far asked for, whether or not it has landed.
func (d *Download) Covered() (covered, total int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.chunks) - d.remaining + d.fetching, len(d.chunks)
}

// Present returns a snapshot of which chunks are present.
func (d *Download) Present() []bool {
	p, _, _ := d.Snapshot()
	return p
}

// Snapshot returns which chunks are present, and the CRC-32C checksums
// of those whose checksum is known (summed).
func (d *Download) Snapshot() (present, summed []bool, sums []uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	present = make([]bool, len(d.chunks))
	summed = make([]bool, len(d.chunks))
	sums = make([]uint32, len(d.chunks))
	for i, c := range d.chunks {
		present[i], summed[i], sums[i] = c.present, c.summed && c.present, c.sum
	}
	return present, summed, sums
}

// Stop cancels every fetch and waits for all goroutines of the download.
// Chunks fetched so far stay present. Stop is idempotent.
func (d *Download) Stop() {
	d.cancel()
	d.wg.Wait()
}

// IsStale reports whether err means the version being downloaded is gone
// from the bucket, so that retrying cannot help.
func IsStale(err error) bool { return errors.Is(err, ErrNotExist) }

// sizeMismatch is the error of a read of n bytes at off that got got
// bytes: it says which way the sizes differ, with both numbers.
func sizeMismatch(bucket, name string, gen, off, got, n int64) error {
	how := "the object ended early: it is shorter than the size it was opened with"
	if got > n {
		how = "the server sent more bytes than asked for: the object is longer than the size it was opened with"
	}
	return fmt.Errorf("read gs://%s/%s#%d at offset %d: got %d bytes, want %d (%s): %w", bucket, name, gen, off, got, n, how, ErrShortRead)
}
