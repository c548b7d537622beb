package transfer

import (
	"bufio"
	"context"
	"io"
	"sync"

	"github.com/bucketfs/bucketfs/internal/crc32c"
)

// How a chunk's bytes come over: one range request, or several at once
// (parts of it, DownloadOptions.MinRange), each written to dst in order
// through a buffer that tells waiting readers how far it got, and
// pausing for readers elsewhere (Priority) while no reader waits for it.

// progressBuf is the buffer a fetch writes through: every flush lands in
// dst at the next offset and is announced to waiting readers.
const progressBuf = 1 << 20

var bufPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, progressBuf) }}

// progressWriter writes a chunk's bytes, or one part's, to dst in order,
// publishing how far it got.
type progressWriter struct {
	d    *Download
	a    *attempt
	off  int64  // where it writes from, in the object
	part int    // which of a.parts it is, if any
	n    int64  // bytes written so far
	crc  uint32 // CRC-32C of those bytes
}

// Write lands p, counts it (OnFetched), and tells the readers waiting
// for it, in that order: a reader that has its bytes finds them counted.
func (w *progressWriter) Write(p []byte) (int, error) {
	n, err := w.d.dst.WriteAt(p, w.off+w.n)
	w.crc = crc32c.Update(w.crc, p[:n])
	w.n += int64(n)
	if w.d.onGot != nil && n > 0 {
		why := w.a.why
		if w.a.waited.Load() && why != FetchRead {
			why = FetchRead // a reader came to wait for it
		}
		w.d.onGot(why, int64(n))
	}
	w.d.mu.Lock()
	if w.a.parts == nil {
		w.a.written = w.n
	} else {
		w.a.parts[w.part].n = w.n
		w.a.written = w.d.prefixLocked(w.a)
	}
	close(w.a.moved)
	w.a.moved = make(chan struct{})
	w.d.mu.Unlock()
	return n, err
}

// yieldGrain is how much of a background fetch's body is read between
// looks at whether a reader waits (Priority): a look is an atomic load.
const yieldGrain = 64 << 10

// yieldWriter passes a fetch's body on to w, and in a fetch no reader
// waits for, pauses every yieldGrain bytes while readers wait for
// others: the body is not read meanwhile.
type yieldWriter struct {
	d     *Download
	a     *attempt
	w     io.Writer
	since int
	bg    pauser
}

func (y *yieldWriter) Write(p []byte) (int, error) {
	if len(p) > 0 && !y.a.heardOnce.Load() && y.a.heardOnce.CompareAndSwap(false, true) {
		close(y.a.heard) // the bucket answers with the version's bytes
	}
	n, err := y.w.Write(p)
	if y.since += n; y.since >= yieldGrain && err == nil {
		y.since = 0
		if !y.a.waited.Load() {
			y.bg.pause(y.d.life, y.a.wanted)
		}
	}
	return n, err
}

// read copies n bytes at off (a chunk) into dst for attempt a, by one
// request or by d.split(n) at once, and returns their CRC-32C.
func (d *Download) read(a *attempt, off, n int64) (uint32, error) {
	k := d.split(n)
	if k == 1 {
		return d.readPart(d.life, a, off, 0, n)
	}
	parts := make([]partProgress, k)
	for j := range parts {
		_, parts[j].len = d.part(n, k, j)
	}
	d.mu.Lock()
	a.parts, a.written = parts, 0
	d.mu.Unlock()
	ctx, cancel := context.WithCancel(d.life)
	defer cancel()
	sums := make([]uint32, k)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error // the error of the part that failed first
	)
	for j := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			poff, plen := d.part(n, k, j)
			var err error
			if sums[j], err = d.readPart(ctx, a, off+poff, j, plen); err != nil {
				once.Do(func() {
					first = err
					cancel() // the chunk fails: the other parts are not needed
				})
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	var sum uint32
	for j := range k {
		sum = crc32c.Combine(sum, sums[j], parts[j].len)
	}
	return sum, nil
}

// split returns how many requests at once fetch a chunk of n bytes: as
// many as the object's share of Parallelism per chunk allows, each of at
// least MinRange bytes; 1 without MinRange.
func (d *Download) split(n int64) int {
	if d.minRq <= 0 || n < 2*d.minRq {
		return 1
	}
	return int(max(1, min(int64(d.par/len(d.chunks)), n/d.minRq, maxSplit)))
}

// maxSplit bounds the requests of one chunk, whatever the options.
const maxSplit = 64

// part returns where part j of k of a chunk of n bytes begins in it, and
// its length: the chunk cut evenly, the first parts a byte longer where
// it does not divide.
func (d *Download) part(n int64, k, j int) (off, length int64) {
	q, r := n/int64(k), n%int64(k)
	off = int64(j)*q + min(int64(j), r)
	length = q
	if int64(j) < r {
		length++
	}
	return off, length
}

// prefixLocked returns how many bytes from a's chunk's start dst holds
// without a gap: the parts done in full, and what the next has written.
func (d *Download) prefixLocked(a *attempt) int64 {
	var total int64
	for _, p := range a.parts {
		total += p.n
		if p.n < p.len {
			break
		}
	}
	return total
}

// readPart copies length bytes at off into dst for part j of attempt a
// (j is 0 when the chunk is one request), and returns their CRC-32C.
func (d *Download) readPart(ctx context.Context, a *attempt, off int64, j int, length int64) (uint32, error) {
	pw := &progressWriter{d: d, a: a, off: off, part: j}
	bw := bufPool.Get().(*bufio.Writer)
	bw.Reset(pw)
	if a.waited.Load() {
		ctx = Foreground(ctx)
	}
	got, err := d.b.ReadRange(ctx, d.name, d.gen, off, length, &yieldWriter{d: d, a: a, w: bw, bg: pauser{p: d.prio}})
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	bufPool.Put(bw)
	if err == nil && got != length {
		err = sizeMismatch(d.b.Name(), d.name, d.gen, off, got, length)
	}
	return pw.crc, err
}
