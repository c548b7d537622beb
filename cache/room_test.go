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

// stillWaiting fails the test if errc reports within 100 ms: what it
// reports for must still wait. A bounded look, not a synchronization:
// what it checks ended within microseconds when it did not wait.
func stillWaiting(t *testing.T, errc <-chan error, what string) {
	t.Helper()
	select {
	case err := <-errc:
		t.Fatalf("%s ended (%v), where it must wait", what, err)
	case <-time.After(100 * time.Millisecond):
	}
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

// A write waiting for room while its file is renamed, deleted or
// exchanged takes the room for the entry its handle has when the room
// comes, not the one it had when it began to wait. Before, the room went
// to the old name's deletion, which kept it until the deletion reached
// the bucket, and the write's bytes counted again under the new name; or
// (an exchange: the old entry dropped) the write went on with no room
// made, past the cap. An orphan (the file deleted) counts nothing.
func TestAWriteWaitingForRoomFollowsItsFile(t *testing.T) {
	for _, tc := range []struct {
		change string
		waits  bool  // for the room, after the change
		used   int64 // when the write is done
	}{
		// Besides other's 5 KiB (cached below):
		{"rename", true, 35 << 10},   // doc2, the file written
		{"remove", false, 5 << 10},   // the write's bytes are the orphan's: no room needed
		{"exchange", true, 35 << 10}, // other: the file written; doc: other's content
	} {
		t.Run(tc.change, func(t *testing.T) {
			e := newEnv(t)
			a := e.put("doc", pattern(10<<10, 1))
			b := e.put("other", pattern(5<<10, 4))
			// Nothing leaves: the changes hold the room.
			e.emu.SetHook(func(r *http.Request) (int, bool) {
				return http.StatusServiceUnavailable, isUpload(r) || r.Method == http.MethodDelete
			})
			o := e.opts(100 << 10)
			o.FullWait = time.Minute
			o.WriteBackDelay = time.Hour
			c, err := Open(o, e.b)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			e.write(c, transfer.ObjectAttrs{Name: "big"}, true, 0, pattern(80<<10, 2))
			e.cacheAll(c, b, pattern(5<<10, 4))
			h, err := c.OpenWrite(e.ctx, a, false, false)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			done := make(chan error, 1)
			go func() {
				_, err := h.WriteAt(pattern(30<<10, 3), 0) // doc from 10 to 30 KiB: no room
				done <- err
			}()
			waitFor(t, e.ctx, func() bool {
				c.mu.Lock()
				defer c.mu.Unlock()
				return c.budget.Waiters() > 0
			}, "the write to wait for room")
			switch tc.change {
			case "rename":
				_, err = c.Rename(e.ctx, a, "doc2", 0)
			case "remove":
				err = c.Remove(e.ctx, "doc", a.Generation)
			case "exchange":
				_, _, err = c.Exchange(e.ctx, a, b)
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.waits {
				// No room came: the write still waits (before, an exchange
				// let it go within microseconds, past the cap).
				stillWaiting(t, done, "after the "+tc.change+", the write")
			}
			// Room comes: big is deleted (never uploaded: settled at once).
			if err := c.Remove(e.ctx, "big", 0); err != nil {
				t.Fatal(err)
			}
			withinASecond(t, done, "the waiting write")
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			if used := c.Stats().UsedBytes; used != tc.used {
				t.Errorf("%d bytes counted, want %d", used, tc.used)
			}
		})
	}
}

// A write that reserved its room and has not begun when its file is
// renamed ends under the new name, where its reservation counts once.
func TestRenameMovesAWritesReservation(t *testing.T) {
	e := newEnv(t)
	a := e.put("doc", pattern(10<<10, 1))
	c := e.openWB(time.Hour)
	w, err := c.openWriter(e.ctx, a, false, false)
	if err != nil {
		t.Fatal(err)
	}
	h := w.h
	defer h.Close()
	// WriteAt's first step for 30 KiB at 0; the rename comes before the
	// rest of the write.
	if err := c.makeRoomToGrow(w, 30<<10); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Rename(e.ctx, a, "doc2", 0); err != nil {
		t.Fatal(err)
	}
	if used := c.Stats().UsedBytes; used != 30<<10 {
		t.Errorf("after the rename: %d bytes counted, want the reservation's %d once", used, 30<<10)
	}
	if _, err := h.WriteAt(pattern(30<<10, 3), 0); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if used := c.Stats().UsedBytes; used != 30<<10 {
		t.Errorf("after the write: %d bytes counted, want %d", used, 30<<10)
	}
}

// Unpin makes pinned copies evictable: a write waiting for the room they
// held takes it at once, not at its deadline.
func TestUnpinWakesAWriteWaitingForRoom(t *testing.T) {
	e := newEnv(t)
	a := e.put("pinned", pattern(80<<10, 1))
	o := e.opts(100 << 10)
	o.FullWait = time.Minute
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WarmVersion(e.ctx, a); err != nil {
		t.Fatal(err)
	}
	done := growInBackground(e, c, "new", 30<<10)
	waitFor(t, e.ctx, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.budget.Waiters() > 0
	}, "the write to wait for room")
	if n, _ := c.Unpin([]string{""}); n != 1 {
		t.Fatalf("unpinned %d copies, want 1", n)
	}
	withinASecond(t, done, "the write waiting for the room of a pinned copy")
}
