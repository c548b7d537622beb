package transfer

import (
	"bytes"
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
)

// fetchCounter counts OnFetched's bytes by reason.
type fetchCounter [NumFetchReasons]atomic.Int64

func (c *fetchCounter) add(r FetchReason, n int64) { c[r].Add(n) }

// While a reader waits, no background walk claims a chunk: a reader's
// fetch of one object goes out while another object's walk holds back,
// and the walk goes on once no reader waits. The bytes are counted by
// why they were fetched.
func TestPriorityWalkWaitsForReaders(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	const size = 8 * testChunk
	dataA, dataB := testutil.Pattern(size, 40), testutil.Pattern(size, 41)
	genA, genB := put(t, emu, "a", dataA), put(t, emu, "b", dataB)
	ctx := testutil.Ctx(t, 60*time.Second)
	p := &Priority{maxPause: time.Hour} // a pause ends only when no reader waits
	var got fetchCounter
	o := DownloadOptions{ChunkSize: testChunk, Parallelism: 2, Priority: p, OnFetched: got.add}

	elsewhere := p.enter() // a reader waiting for some other object
	a := NewDownload(g, "a", genA, size, newMemFile(size, 0), nil, o)
	defer a.Stop()
	a.Start()
	dstB := newMemFile(size, 0)
	b := NewDownload(g, "b", genB, size, dstB, nil, o)
	defer b.Stop()
	if err := b.Ensure(ctx, 5*testChunk, 1); err != nil {
		t.Fatalf("Ensure of b's chunk 5: %v", err)
	}
	if !bytes.Equal(dstB.bytes(5*testChunk, testChunk), dataB[5*testChunk:6*testChunk]) {
		t.Fatal("b's chunk 5 holds the wrong bytes")
	}
	if n := emu.MediaReads(bucketName, "a"); n != 0 {
		t.Fatalf("a's walk sent %d range reads while a reader waited; want 0", n)
	}
	elsewhere()
	waitClosed(t, ctx, a.Complete(), "a's walk to complete once no reader waits")
	if r, w := got[FetchRead].Load(), got[FetchWhole].Load(); r != testChunk || w != size {
		t.Fatalf("fetched for read %d, whole %d; want %d, %d", r, w, testChunk, size)
	}
}

// A background fetch pauses while a reader waits elsewhere; once a
// reader waits for it, it pauses no more, and its bytes count as read.
// (If it did not go on, the reader would wait for the pause's bound, an
// hour, and its context would end first.)
func TestPriorityWantedFetchGoesOn(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	const size = 2*progressBuf + 1 // one chunk of three buffers
	data := testutil.Pattern(size, 42)
	gen := put(t, emu, "a", data)
	ctx := testutil.Ctx(t, 60*time.Second)
	p := &Priority{maxPause: time.Hour}
	var got fetchCounter
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	emu.SetHook(func(r *http.Request) (int, bool) {
		if isMediaRead(r) {
			arrived <- struct{}{}
			<-release // until a reader waits elsewhere
		}
		return 0, false
	})
	dst := newMemFile(size, 0)
	d := NewDownload(g, "a", gen, size, dst, nil, DownloadOptions{ChunkSize: size, Parallelism: 1, Priority: p, OnFetched: got.add})
	defer d.Stop()
	d.Start() // no reader waits yet: the walk claims chunk 0 at once
	<-arrived
	elsewhere := p.enter()
	defer elsewhere()
	close(release) // the body comes while a reader waits elsewhere: the fetch pauses
	if err := d.Ensure(ctx, size-1, 1); err != nil {
		t.Fatalf("Ensure of the last byte: %v", err)
	}
	if !bytes.Equal(dst.bytes(0, size), data) {
		t.Fatal("the chunk holds the wrong bytes")
	}
	if r, w := got[FetchRead].Load(), got[FetchWhole].Load(); r+w != size || r == 0 {
		t.Fatalf("fetched for read %d, whole %d; want %d in all, some for read", r, w, size)
	}
}

// Priority's yield: at once with no reader waiting; otherwise until no
// reader waits, the fetch is wanted, ctx ends or the pause's bound.
func TestPriorityYield(t *testing.T) {
	p := &Priority{maxPause: time.Hour}
	p.yield(context.Background(), nil) // returns: no reader waits

	done := p.enter()
	wanted := make(chan struct{})
	close(wanted)
	p.yield(context.Background(), wanted) // returns: wanted

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.yield(ctx, nil) // returns: ctx ended

	short := &Priority{maxPause: time.Millisecond}
	end := short.enter()
	if !short.yield(context.Background(), nil) {
		t.Fatal("a pause that ran to its bound did not say so")
	}
	// A pauser whose pause ran to its bound runs as long before the next.
	bg := pauser{p: short}
	bg.pause(context.Background(), nil)
	if bg.free.IsZero() {
		t.Fatal("a bounded pause left the pauser no run before the next")
	}
	end()
	long := &Priority{maxPause: time.Hour}
	endLong := long.enter()
	within := pauser{p: long, free: time.Now().Add(time.Hour)}
	within.pause(context.Background(), nil) // returns at once: it would wait an hour
	endLong()

	back := make(chan struct{})
	go func() {
		p.yield(context.Background(), nil)
		close(back)
	}()
	done()
	select {
	case <-back:
	case <-time.After(time.Minute):
		t.Fatal("yield did not return once no reader waited")
	}
	var none *Priority
	none.enter()()
	none.yield(context.Background(), nil)
}
