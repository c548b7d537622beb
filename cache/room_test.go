package cache

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// roomEnv opens a cache of 16 chunks with a write-back delay of an hour
// whose uploads the bucket refuses (503): a changed file can leave the
// cache only by being removed.
func roomEnv(t *testing.T, fullWait time.Duration) (*env, *Cache) {
	e := newEnv(t)
	o := e.opts(16 * chunk)
	o.WriteBackDelay = time.Hour
	o.FullWait = fullWait
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return e, c
}

// growInBackground writes n bytes into a new file name in another
// goroutine; the channel gets the write's error.
func growInBackground(e *env, c *Cache, name string, n int) <-chan error {
	done := make(chan error, 1)
	go func() {
		w, err := c.OpenWrite(e.ctx, transfer.ObjectAttrs{Name: name}, true, false)
		if err != nil {
			done <- err
			return
		}
		_, err = w.WriteAt(pattern(n, 9), 0)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		done <- err
	}()
	return done
}

// withinASecond fails the test unless done reports success within a
// second of now.
func withinASecond(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(time.Second):
		t.Fatalf("%s: still waiting for room a second after the removal freed it", what)
	}
}

// Issue 26: the room a removal frees reaches the writers that wait for
// it at once. A deletion of a name the bucket never had is settled in
// Remove (no request, nothing counted, no change left to send), so a
// write right after it finds the room; one the bucket must carry out
// costs nothing from the moment Remove returns, and a writer already
// waiting wakes then, not when the deletion reaches the bucket.
func TestRemovalWakesWritersWaitingForRoom(t *testing.T) {
	t.Run("never uploaded", func(t *testing.T) {
		e, c := roomEnv(t, 30*time.Second)
		e.write(c, transfer.ObjectAttrs{Name: "a"}, true, 0, pattern(12*chunk, 1))
		before := e.emu.Requests()
		if err := c.Remove(e.ctx, "a", 0); err != nil {
			t.Fatal(err)
		}
		if n := e.emu.Requests() - before; n != 0 {
			t.Errorf("deleting a file never uploaded made %d requests, want none", n)
		}
		if s := c.Stats(); s.UsedBytes != 0 || s.DirtyFiles != 0 {
			t.Errorf("after deleting a file never uploaded: %d bytes used, %d changes to send; want none", s.UsedBytes, s.DirtyFiles)
		}
		withinASecond(t, growInBackground(e, c, "b", 8*chunk), "a write started right after the removal")
	})
	t.Run("uploaded, open", func(t *testing.T) {
		// The deletion must reach the bucket, and a handle keeps the
		// deleted file open meanwhile: the room comes back at the
		// removal (before this fix: only at the last close, which woke
		// nobody).
		e, c := roomEnv(t, 30*time.Second)
		e.write(c, transfer.ObjectAttrs{Name: "a"}, true, 0, pattern(12*chunk, 1))
		e.flush(c)
		gen, err := e.emu.Generation(bucketName, "a")
		if err != nil {
			t.Fatal(err)
		}
		e.emu.SetHook(func(r *http.Request) (int, bool) { return http.StatusServiceUnavailable, isUpload(r) })
		w, err := c.OpenWrite(e.ctx, transfer.ObjectAttrs{Name: "a", Generation: gen, Size: 12 * chunk}, false, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteAt([]byte("x"), 0); err != nil {
			t.Fatal(err)
		}
		done := growInBackground(e, c, "b", 8*chunk)
		waitFor(t, e.ctx, func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.budget.Waiters() > 0
		}, "the writer to wait for room")
		if err := c.Remove(e.ctx, "a", gen); err != nil {
			t.Fatal(err)
		}
		if err := c.FlushName(e.ctx, "a"); err != nil { // the deletion settles
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		withinASecond(t, done, "a write waiting while a removal settles")
		if _, err := e.b.Stat(e.ctx, "a"); !errors.Is(err, transfer.ErrNotExist) {
			t.Errorf("a in the bucket after its deletion settled: %v, want deleted", err)
		}
		e.emu.SetHook(nil)
		e.flush(c)
	})
}

// A writer that gives up says why: the cap, and the files holding the
// room.
func TestFullCacheSaysWhy(t *testing.T) {
	e, c := roomEnv(t, 100*time.Millisecond)
	e.emu.SetHook(func(r *http.Request) (int, bool) { return http.StatusServiceUnavailable, isUpload(r) })
	e.write(c, transfer.ObjectAttrs{Name: "held"}, true, 0, pattern(12*chunk, 1))
	err := <-growInBackground(e, c, "b", 8*chunk)
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("write past a cap full of changes: %v, want ErrNoSpace", err)
	}
	for _, want := range []string{"64.0 KiB max size", "held 48.0 KiB (", "the largest"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
