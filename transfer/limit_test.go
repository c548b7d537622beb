package transfer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// concurrencyProbe wraps a Bucket and records how many ReadRange calls are
// inside it at once. A request is at the server only while its call is
// inside, so max bounds the concurrency the server sees.
type concurrencyProbe struct {
	Bucket
	cur, max atomic.Int64
}

func (p *concurrencyProbe) ReadRange(ctx context.Context, name string, gen, off, length int64, w io.Writer) (int64, error) {
	n := p.cur.Add(1)
	for {
		m := p.max.Load()
		if n <= m || p.max.CompareAndSwap(m, n) {
			break
		}
	}
	defer p.cur.Add(-1)
	return p.Bucket.ReadRange(ctx, name, gen, off, length, w)
}

// doneProbeCtx reports, by closing asked, the first time a caller asks for
// its Done channel, i.e. when the caller starts waiting on it.
type doneProbeCtx struct {
	context.Context
	once  sync.Once
	asked chan struct{}
}

func (c *doneProbeCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.asked) })
	return c.Context.Done()
}

// parkFirstRead installs a hook that holds the first media read at the
// server until release is closed (or the request ends). parked is closed
// once it is held.
func parkFirstRead(emu *emulator.Server) (parked, release chan struct{}) {
	parked, release = make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	emu.SetHook(func(r *http.Request) (int, bool) {
		if !isMediaRead(r) || !first.CompareAndSwap(false, true) {
			return 0, false
		}
		close(parked)
		select {
		case <-release:
			return 0, false
		case <-r.Context().Done():
			return http.StatusServiceUnavailable, true
		}
	})
	return parked, release
}

func waitClosed(t *testing.T, ctx context.Context, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestLimitedOneSlot: with n = 1 a second read waits while the first one is
// held at the server, and gives up with its context's error.
func TestLimitedOneSlot(t *testing.T) {
	emu := startEmulator(t)
	data := testutil.Pattern(4096, 10)
	gen := put(t, emu, "obj", data)
	l := NewLimited(newTestGCS(t, emu), 1)
	ctx := testutil.Ctx(t, 60*time.Second)
	parked, release := parkFirstRead(emu)

	first := make(chan error, 1)
	go func() {
		var buf bytes.Buffer
		n, err := l.ReadRange(ctx, "obj", gen, 0, 4096, &buf)
		if err == nil && (n != 4096 || !bytes.Equal(buf.Bytes(), data)) {
			err = errors.New("first read returned the wrong bytes")
		}
		first <- err
	}()
	waitClosed(t, ctx, parked, "the first read to reach the server")

	// A read with a deadline: it must wait for the slot, never reach the
	// server, and return its own context's error when the deadline passes.
	dctx, dcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer dcancel()
	if _, err := l.ReadRange(dctx, "obj", gen, 0, 10, io.Discard); err != dctx.Err() || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ReadRange waiting for the only slot: err = %v, want its context's error %v", err, dctx.Err())
	}

	// A read cancelled while it waits for the slot.
	cctx, ccancel := context.WithCancel(ctx)
	probe := &doneProbeCtx{Context: cctx, asked: make(chan struct{})}
	waiting := make(chan error, 1)
	go func() {
		_, err := l.ReadRange(probe, "obj", gen, 0, 10, io.Discard)
		waiting <- err
	}()
	waitClosed(t, ctx, probe.asked, "the second read to wait for a slot")
	ccancel()
	select {
	case err := <-waiting:
		if err != context.Canceled {
			t.Errorf("ReadRange cancelled while waiting for a slot: err = %v, want context.Canceled", err)
		}
	case <-ctx.Done():
		t.Fatal("ReadRange did not return after its context was cancelled while waiting for a slot")
	}
	for _, name := range []string{"Stat", "List"} {
		pctx, pcancel := context.WithCancel(ctx)
		pcancel()
		var err error
		if name == "Stat" {
			_, err = l.Stat(pctx, "obj")
		} else {
			_, err = l.List(pctx, ListQuery{})
		}
		if err != context.Canceled {
			t.Errorf("%s with a cancelled context while the slot is taken: err = %v, want context.Canceled", name, err)
		}
	}

	if got := emu.MediaReads(bucketName, "obj"); got != 1 {
		t.Errorf("while the slot was taken the server saw %d media reads, want 1 (only the first)", got)
	}

	close(release)
	select {
	case err := <-first:
		if err != nil {
			t.Fatalf("first read: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("first read did not finish after release")
	}
	// The slot is free again.
	var buf bytes.Buffer
	if n, err := l.ReadRange(ctx, "obj", gen, 0, 10, &buf); err != nil || n != 10 {
		t.Errorf("ReadRange after the slot was freed = %d, %v; want 10, nil", n, err)
	}
}

// TestLimitedConcurrency: n limits the reads inside the wrapped bucket, and
// n of them do run at once.
func TestLimitedConcurrency(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run("", func(t *testing.T) {
			emu := startEmulator(t)
			data := testutil.Pattern(8192, 11)
			gen := put(t, emu, "obj", data)
			probe := &concurrencyProbe{Bucket: newTestGCS(t, emu)}
			l := NewLimited(probe, n)
			ctx := testutil.Ctx(t, 60*time.Second)

			// Hold every read at the server until n of them are there, so
			// that a limiter allowing fewer than n would never get going.
			var arrived atomic.Int64
			full := make(chan struct{})
			emu.SetHook(func(r *http.Request) (int, bool) {
				if !isMediaRead(r) {
					return 0, false
				}
				if arrived.Add(1) == int64(n) {
					close(full)
				}
				select {
				case <-full:
					return 0, false
				case <-r.Context().Done():
					return http.StatusServiceUnavailable, true
				}
			})

			const readers = 8
			var wg sync.WaitGroup
			errs := make(chan error, readers)
			for i := range readers {
				wg.Go(func() {
					var buf bytes.Buffer
					off := int64(i * 1024)
					got, err := l.ReadRange(ctx, "obj", gen, off, 1024, &buf)
					if err == nil && (got != 1024 || !bytes.Equal(buf.Bytes(), data[off:off+1024])) {
						err = errors.New("wrong bytes")
					}
					if err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("read through NewLimited(%d): %v", n, err)
			}
			if m := probe.max.Load(); m != int64(n) {
				t.Errorf("NewLimited(%d): at most %d reads ran at once, want exactly %d", n, m, n)
			}
			if got := emu.MediaReads(bucketName, "obj"); got != readers {
				t.Errorf("server saw %d media reads, want %d", got, readers)
			}
		})
	}
}

// TestLimitedReleasesOnError: failed calls give their slot back.
func TestLimitedReleasesOnError(t *testing.T) {
	emu := startEmulator(t)
	l := NewLimited(newTestGCS(t, emu), 1)
	ctx := testutil.Ctx(t, 30*time.Second)
	for i := range 3 {
		if _, err := l.Stat(ctx, "missing"); !errors.Is(err, ErrNotExist) {
			t.Fatalf("Stat %d of a missing object: err = %v, want ErrNotExist", i, err)
		}
		if _, err := l.ReadRange(ctx, "missing", 0, 0, 1, io.Discard); !errors.Is(err, ErrNotExist) {
			t.Fatalf("ReadRange %d of a missing object: err = %v, want ErrNotExist", i, err)
		}
		if err := l.Delete(ctx, "missing", 0); !errors.Is(err, ErrNotExist) {
			t.Fatalf("Delete %d of a missing object: err = %v, want ErrNotExist", i, err)
		}
	}
}

func TestNewLimitedClampsN(t *testing.T) {
	emu := startEmulator(t)
	put(t, emu, "obj", []byte("x"))
	l := NewLimited(newTestGCS(t, emu), 0)
	if cap(l.sem) != 1 {
		t.Errorf("NewLimited(b, 0) has %d slots, want 1", cap(l.sem))
	}
	if _, err := l.Stat(testutil.Ctx(t, 30*time.Second), "obj"); err != nil {
		t.Errorf("Stat through NewLimited(b, 0): %v", err)
	}
}

// A reader's range read (Foreground) goes out while background reads
// hold every shared slot; a background one waits for a shared slot.
func TestLimitedKeepsSlotsForReaders(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	data := []byte("0123456789")
	gen := put(t, emu, "obj", data)
	ctx := testutil.Ctx(t, 30*time.Second)
	parked, release := parkFirstRead(emu)
	l := NewLimited(g, 1)
	held := make(chan error, 1)
	go func() { // the background read that takes the one shared slot
		_, err := l.ReadRange(ctx, "obj", gen, 0, 1, io.Discard)
		held <- err
	}()
	<-parked

	var buf bytes.Buffer
	if _, err := l.ReadRange(Foreground(ctx), "obj", gen, 2, 3, &buf); err != nil || buf.String() != "234" {
		t.Fatalf("foreground read with the shared slot taken: %q, %v", buf.String(), err)
	}
	probe := &doneProbeCtx{Context: ctx, asked: make(chan struct{})}
	background := make(chan error, 1)
	go func() {
		_, err := l.ReadRange(probe, "obj", gen, 0, 1, io.Discard)
		background <- err
	}()
	<-probe.asked // it waits for a slot
	select {
	case err := <-background:
		t.Fatalf("a background read went out with the shared slot taken: %v", err)
	default:
	}
	close(release)
	for _, ch := range []chan error{held, background} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
}
