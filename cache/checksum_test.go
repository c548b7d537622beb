package cache

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"

	"github.com/bucketfs/bucketfs/transfer"
	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// The cache directory is not trusted blindly: a copy damaged behind the
// cache's back (a failing disk, a careless hand) is never served, never
// uploaded, and a changed file with damage is never lost.

// damage changes the data file of name's cached version with f, while the
// cache is closed, and returns the file's path.
func (e *env) damage(name string, f func(path string) error) string {
	e.t.Helper()
	r, ok := records(e.t, e.dir)[name]
	if !ok {
		e.t.Fatalf("no record of %s", name)
	}
	path := e.dir + "/data/" + hexID(r.ID)
	if err := f(path); err != nil {
		e.t.Fatalf("damaging %s: %v", path, err)
	}
	return path
}

func hexID(id uint64) string { return strconv.FormatUint(id, 16) }

func truncateTo(n int64) func(string) error {
	return func(path string) error { return os.Truncate(path, n) }
}

// TestDamagedCleanCopyIsFetchedAgain: a clean copy cut short or with a
// flipped byte is caught at the next start or open, whatever the path
// (a read handle checked at open, a read handle checked chunk by chunk
// while a background check runs, a write), and the bytes served and
// uploaded are the bucket's.
func TestDamagedCleanCopyIsFetchedAgain(t *testing.T) {
	for _, tt := range []struct {
		name   string
		damage func(string) error
		async  bool // the copy is checked in the background, reads check their chunks
		write  bool // then write one byte and flush
	}{
		{"truncated, read", truncateTo(4 * chunk), false, false},
		{"truncated, written", truncateTo(4 * chunk), false, true},
		{"flipped, read", testutil.FlipByte(5*chunk + 17), false, false},
		{"flipped, read while checked in the background", testutil.FlipByte(5*chunk + 17), true, false},
		{"flipped, written", testutil.FlipByte(7*chunk + 3), false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			data := pattern(objSize, 41)
			a := e.put("obj", data)
			c := e.openWB(time.Hour)
			e.cacheAll(c, a, data)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			e.damage("obj", tt.damage)
			before := e.mediaReads("obj")

			c = e.openWB(0)
			if tt.async {
				c.verify.SyncMax, c.verify.Wait = 0, 0
			}
			if tt.write {
				e.write(c, a, false, 0, []byte{'X'})
				e.flush(c)
				want := bytes.Clone(data)
				want[0] = 'X'
				if got := e.object("obj"); !bytes.Equal(got, want) {
					t.Fatalf("the bucket has %d bytes that are not the object with one byte written (%d bytes): damage was uploaded", len(got), len(want))
				}
			} else {
				h := e.openHandle(c, a)
				if _, pt := h.PassthroughFd(); pt && tt.async {
					t.Error("a copy not yet checked is offered for passthrough")
				}
				e.mustReadAll(h, data)
				h.Close()
				// A later open reads the repaired copy, checked.
				h = e.openHandle(c, a)
				e.mustReadAll(h, data)
				h.Close()
			}
			if e.mediaReads("obj") == before {
				t.Error("nothing was fetched again: the damage went unseen")
			}
			if n := c.Stats().ChecksumMismatches; n == 0 {
				t.Error("no checksum mismatch counted")
			}
		})
	}
}

// TestCheckedCopyIsPassedThrough: an undamaged copy from an earlier run is
// checked once and then offered for passthrough; nothing is fetched. A
// large one is checked in the background, which its open waits for.
func TestCheckedCopyIsPassedThrough(t *testing.T) {
	for _, large := range []bool{false, true} {
		t.Run(map[bool]string{false: "small", true: "large"}[large], func(t *testing.T) { checkedCopyIsPassedThrough(t, large) })
	}
}

func checkedCopyIsPassedThrough(t *testing.T, large bool) {
	e := newEnv(t)
	data := pattern(objSize, 42)
	a := e.put("obj", data)
	c := e.openWB(time.Hour)
	e.cacheAll(c, a, data)
	c.Close()
	before := e.mediaReads("obj")
	c = e.openWB(time.Hour)
	if large {
		c.verify.SyncMax, c.verify.Wait = 0, time.Minute
	}
	h := e.openHandle(c, a)
	if _, pt := h.PassthroughFd(); !pt {
		t.Error("a small copy checked at open is not offered for passthrough")
	}
	e.mustReadAll(h, data)
	h.Close()
	if got := e.mediaReads("obj"); got != before {
		t.Errorf("%d reads from the bucket for a sound copy", got-before)
	}
	if n := c.Stats().ChecksumMismatches; n != 0 {
		t.Errorf("%d mismatches counted for a sound copy", n)
	}
}

// TestDamagedChangedFileIsHeld: a changed file whose unwritten bytes are
// damaged is never uploaded and never removed; it answers ErrDamaged and
// is named by Status and Flush until Resolve keeps the local bytes or
// takes the bucket's version (the local bytes then go to lost+found).
func TestDamagedChangedFileIsHeld(t *testing.T) {
	for _, keep := range []bool{true, false} {
		name := "take-bucket"
		if keep {
			name = "keep-local"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			data := pattern(objSize, 43)
			a := e.put("obj", data)
			c := e.openWB(time.Hour)
			e.cacheAll(c, a, data)
			e.write(c, a, false, 1, []byte("local"))
			c.crash()
			local := bytes.Clone(data)
			copy(local[1:], "local")
			e.damage("obj", testutil.FlipByte(6*chunk+100))
			local[6*chunk+100] ^= 0xff

			var uploads atomic.Int64
			e.emu.SetAfterHook(func(r *http.Request) {
				if isUpload(r) {
					uploads.Add(1)
				}
			})
			c = e.openWB(0)
			waitFor(t, e.ctx, func() bool { return len(c.Status(10).Held) == 1 }, "the file to be held")
			st := c.Status(10)
			if st.Held[0].Name != "obj" || st.DamagedFiles != 1 || st.ChecksumMismatches == 0 {
				t.Fatalf("status: held %+v, damaged %d, mismatches %d", st.Held, st.DamagedFiles, st.ChecksumMismatches)
			}
			if _, err := c.Open(e.ctx, a); !errors.Is(err, ErrDamaged) {
				t.Errorf("Open of a held file = %v, want ErrDamaged", err)
			}
			if _, err := c.OpenWrite(e.ctx, a, false, false); !errors.Is(err, ErrDamaged) {
				t.Errorf("OpenWrite of a held file = %v, want ErrDamaged", err)
			}
			ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
			left := c.Flush(ctx, nil)
			if len(left) != 1 || left[0] != "obj" || ctx.Err() != nil {
				t.Errorf("Flush = %v (ctx %v), want [obj] at once", left, ctx.Err())
			}
			cancel()
			if n := uploads.Load(); n != 0 {
				t.Fatalf("%d uploads of a held file", n)
			}
			if got := e.object("obj"); !bytes.Equal(got, data) {
				t.Fatal("the bucket's object changed while the file was held")
			}

			saved, err := c.Resolve(e.ctx, "obj", keep)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if keep {
				e.flush(c)
				if got := e.object("obj"); !bytes.Equal(got, local) {
					t.Fatal("after --keep-local the bucket does not have the local bytes")
				}
				return
			}
			got, err := os.ReadFile(saved)
			if err != nil || !bytes.Equal(got, local) {
				t.Fatalf("lost+found copy %s: %v, equal %v", saved, err, bytes.Equal(got, local))
			}
			if _, ok := c.Local("obj"); ok {
				t.Error("after --take-bucket the name still has local changes")
			}
			e.cacheAll(c, a, data)
			if got := e.object("obj"); !bytes.Equal(got, data) {
				t.Fatal("the bucket's object changed")
			}
		})
	}
}

// TestUploadCarriesChecksum: every upload of a changed file tells the
// bucket the CRC32C of what it sends.
func TestUploadCarriesChecksum(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var sent []string
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		if isUpload(r) {
			var body bytes.Buffer
			body.ReadFrom(r.Body)
			r.Body.Close()
			mu.Lock()
			if bytes.Contains(body.Bytes(), []byte(`"crc32c"`)) {
				sent = append(sent, "crc32c")
			} else {
				sent = append(sent, "none")
			}
			mu.Unlock()
			r.Body = nopCloser{bytes.NewReader(body.Bytes())}
		}
		return 0, false
	})
	c := e.openWB(0)
	e.write(c, transfer.ObjectAttrs{Name: "new"}, true, 0, pattern(3*chunk+5, 44))
	e.flush(c)
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 1 || sent[0] != "crc32c" {
		t.Fatalf("uploads sent: %v, want one with a crc32c", sent)
	}
}

// TestChangedWhileUploadingSentAgain: a file written while its upload
// is being sent makes the bucket refuse that upload (its bytes no longer
// have the CRC32C summed before it was sent). That is a race with the
// application, not a failure: it is logged at INFO as "changed while
// uploading; sending again", not counted or reported as a failure, and
// the new content is sent at once.
func TestChangedWhileUploadingSentAgain(t *testing.T) {
	e := newEnv(t)
	var log logBuffer
	o := e.opts(64 << 20)
	o.WriteBackDelay = time.Hour // sent by the Flush below only
	o.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Bigger than what the client and the loopback socket buffer before
	// the emulator reads the body, so that the tail is read from the file
	// after the hook changed it.
	const size = 32 << 20
	data := pattern(size, 47)
	e.write(c, transfer.ObjectAttrs{Name: "f"}, true, 0, data)
	la, ok := c.Local("f")
	if !ok {
		t.Fatal("the new file is not local")
	}
	tail := []byte("changed while it was being sent")
	want := append(bytes.Clone(data[:size-len(tail)]), tail...)
	var uploads atomic.Int32
	hookErr := make(chan error, 1)
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		if !isUpload(r) || uploads.Add(1) != 1 {
			return 0, false
		}
		// The first upload's request has arrived; its body is not read
		// yet. Change the end of the file, as an application would.
		w, err := c.OpenWrite(r.Context(), la, false, false)
		if err == nil {
			_, err = w.WriteAt(tail, size-int64(len(tail)))
			if cerr := w.Close(); err == nil {
				err = cerr
			}
		}
		hookErr <- err
		return 0, false
	})
	e.flush(c)
	e.emu.SetHook(nil)
	select {
	case err := <-hookErr:
		if err != nil {
			t.Fatalf("writing during the upload: %v", err)
		}
	default:
		t.Fatal("no upload reached the bucket")
	}
	if got := e.object("f"); !bytes.Equal(got, want) {
		t.Fatal("the bucket does not have the content written during the upload")
	}
	if n := uploads.Load(); n != 2 {
		t.Errorf("%d uploads, want 2 (the refused one and the one sent again)", n)
	}
	logged := log.String()
	if !strings.Contains(logged, `level=INFO msg="changed while uploading; sending again" object=f`) {
		t.Errorf("no INFO line for the upload refused because the file changed; the log:\n%s", logged)
	}
	if strings.Contains(logged, "level=WARN") || strings.Contains(logged, "level=ERROR") {
		t.Errorf("a file changed while it was sent logged a warning or an error:\n%s", logged)
	}
	if n := c.Stats().UploadFailures; n != 0 {
		t.Errorf("%d upload failures counted, want 0", n)
	}
	if errs := c.Status(1).Errors; len(errs) != 0 {
		t.Errorf("errors reported: %v", errs)
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// waitFor polls ok until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, ok func() bool, what string) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestDamagedChangedFileHeldOnRead: damage in bytes a changed file did
// not write is caught when the file is read, before any upload: the read
// answers ErrDamaged, never the damaged bytes.
func TestDamagedChangedFileHeldOnRead(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(map[bool]string{false: "checked at open", true: "checked while read"}[async], func(t *testing.T) {
			e := newEnv(t)
			data := pattern(objSize, 45)
			a := e.put("obj", data)
			c := e.openWB(time.Hour)
			e.cacheAll(c, a, data)
			e.write(c, a, false, 1, []byte("local"))
			c.crash()
			e.damage("obj", testutil.FlipByte(8*chunk+9))

			c = e.openWB(time.Hour)
			if async {
				c.verify.SyncMax, c.verify.Wait = 0, 0
			}
			la, ok := c.Local("obj")
			if !ok {
				t.Fatal("the change is not local after the restart")
			}
			h, err := c.Open(e.ctx, la)
			if err == nil {
				_, err = readAll(e.ctx, h)
				h.Close()
			}
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("reading a damaged changed file: %v, want ErrDamaged", err)
			}
			if held := c.Status(1).Held; len(held) != 1 {
				t.Fatalf("held: %v", held)
			}
		})
	}
}

// TestGzipObjectShowsStoredBytes: an object stored gzip-encoded is cached
// and read as its stored bytes, checked against its checksum; a change
// to it is uploaded with its encoding kept.
func TestGzipObjectShowsStoredBytes(t *testing.T) {
	e := newEnv(t)
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(pattern(5*chunk, 46))
	zw.Close()
	stored := zb.Bytes()
	e.emu.Fake().CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: bucketName, Name: "z", ContentEncoding: "gzip"}, Content: stored})
	a, err := e.b.Stat(e.ctx, "z")
	if err != nil {
		t.Fatal(err)
	}
	c := e.openWB(0)
	e.cacheAll(c, a, stored)
	if n := c.Stats().ChecksumMismatches; n != 0 {
		t.Fatalf("%d checksum mismatches reading a gzip-encoded object", n)
	}
	e.write(c, a, false, int64(len(stored)), []byte("tail"))
	e.flush(c)
	got, err := e.b.Stat(e.ctx, "z")
	if err != nil {
		t.Fatal(err)
	}
	if got.ContentEncoding != "gzip" || got.Size != int64(len(stored))+4 {
		t.Errorf("after a change the object has encoding %q and %d bytes; want gzip and %d", got.ContentEncoding, got.Size, len(stored)+4)
	}
}

// TestFsckChecksSums: fsck of an unmounted cache checks every copy
// against its sums: a sound cache reports nothing, a damaged clean copy
// is a bad copy, damage in bytes a changed file did not write is held.
func TestFsckChecksSums(t *testing.T) {
	e := newEnv(t)
	clean, changed := pattern(objSize, 47), pattern(objSize, 48)
	ac, ach := e.put("clean", clean), e.put("changed", changed)
	c := e.openWB(time.Hour)
	e.cacheAll(c, ac, clean)
	e.cacheAll(c, ach, changed)
	e.write(c, ach, false, 0, []byte("x"))
	// Close (the change stays dirty: its delay is an hour) records the
	// sums of both copies; a crash could come before the clean copy's
	// download was retired and its sums recorded.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Fsck(e.dir, FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.CheckedCopies != 2 || len(rep.BadCopies) != 0 || len(rep.Held) != 0 {
		t.Fatalf("fsck of a sound cache: checked %d, bad %v, held %v", rep.CheckedCopies, rep.BadCopies, rep.Held)
	}
	e.damage("clean", testutil.FlipByte(3*chunk))
	e.damage("changed", truncateTo(6*chunk+5))
	rep, err = Fsck(e.dir, FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.BadCopies) != 1 || len(rep.Held) != 1 {
		t.Fatalf("fsck of a damaged cache: bad %v, held %v; want one of each", rep.BadCopies, rep.Held)
	}
	t.Logf("bad: %v; held: %v", rep.BadCopies, rep.Held)
}

// A gzip-encoded object changed in place keeps its encoding when the
// change goes up in parts (a parallel upload), as it does in one
// request: the compose into place carries it.
func TestGzipObjectChangedInPartsKeepsEncoding(t *testing.T) {
	e := newEnv(t)
	var zb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zb, gzip.NoCompression) // stays larger than LargeThreshold
	zw.Write(pattern(64*chunk, 49))
	zw.Close()
	stored := zb.Bytes()
	e.emu.Fake().CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: bucketName, Name: "z", ContentEncoding: "gzip"}, Content: stored})
	a, err := e.b.Stat(e.ctx, "z")
	if err != nil {
		t.Fatal(err)
	}
	o := e.opts(64 << 20)
	o.Large = transfer.NewParallel(e.b, transfer.ParallelOptions{PartSize: 4 << 10, RetryBase: time.Millisecond})
	o.LargeThreshold = 16 << 10
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var composes atomic.Int64
	e.emu.SetHook(func(r *http.Request) (int, bool) {
		if isCompose(r) {
			composes.Add(1)
		}
		return 0, false
	})
	e.cacheAll(c, a, stored)
	e.write(c, a, false, int64(len(stored)), []byte("tail"))
	e.flush(c)
	got, err := e.b.Stat(e.ctx, "z")
	if err != nil {
		t.Fatal(err)
	}
	if composes.Load() == 0 {
		t.Errorf("the change was not sent in parts")
	}
	if got.Generation == a.Generation || got.ContentEncoding != "gzip" || got.Size != int64(len(stored))+4 {
		t.Errorf("after a change sent in parts the object has encoding %q and %d bytes (generation %d, was %d); want gzip and %d", got.ContentEncoding, got.Size, got.Generation, a.Generation, len(stored)+4)
	}
}

// Resolve taking the bucket's version drops nothing that changed while
// it kept the local bytes in lost+found: a file deleted and made again
// in the meantime (the same entry, a new data file) stays.
func TestResolveKeepsAFileMadeAgainMeanwhile(t *testing.T) {
	e := newEnv(t)
	a := e.put("f", []byte("old"))
	c := e.openWB(time.Hour)
	e.write(c, a, true, 0, []byte("local"))
	c.mu.Lock()
	c.entries["f"].Rec.Damaged = "held by the test" // as hold does
	c.mu.Unlock()
	testAfterSaveLost = func(string) {
		testAfterSaveLost = nil
		if err := c.Remove(e.ctx, "f", a.Generation); err != nil {
			t.Error(err)
		}
		e.write(c, transfer.ObjectAttrs{Name: "f"}, true, 0, []byte("new file"))
	}
	defer func() { testAfterSaveLost = nil }()
	if _, err := c.Resolve(e.ctx, "f", false); err == nil {
		t.Error("Resolve dropped f though it changed meanwhile")
	}
	e.flush(c)
	if got := e.object("f"); string(got) != "new file" {
		t.Errorf("the bucket has %q, want %q", got, "new file")
	}
}
