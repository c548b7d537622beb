package control

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestStatusAndFlush(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, SocketName)
	// A stale socket, as a crash leaves it, is replaced.
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()

	flushes := make(chan struct{}, 2)
	s, err := Listen(path, Handler{
		Status: func(n int) Status { return Status{Bucket: "b", DirtyFiles: n} },
		Flush: func(ctx context.Context, progress func(Progress)) []string {
			progress(Progress{Files: 2, Bytes: 10})
			progress(Progress{Files: 1, Bytes: 4})
			flushes <- struct{}{}
			<-ctx.Done() // the last file never goes: the timeout (or Close) ends it
			return []string{"stuck"}
		},
	}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 || st.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket %v, %v; want a socket with mode 0600", st.Mode(), err)
	}

	got, err := GetStatus(testutil.Ctx(t, 30*time.Second), path, 7)
	if err != nil || got.Bucket != "b" || got.DirtyFiles != 7 {
		t.Fatalf("GetStatus = %+v, %v", got, err)
	}

	var seen []Progress
	left, err := Flush(testutil.Ctx(t, 30*time.Second), path, 200*time.Millisecond, func(p Progress) { seen = append(seen, p) })
	if err != nil {
		t.Fatal(err)
	}
	<-flushes
	if len(left) != 1 || left[0] != "stuck" || len(seen) != 2 || seen[1].Files != 1 {
		t.Errorf("Flush left %v with progress %v; want [stuck] after 2 then 1 files", left, seen)
	}

	// Without a timeout, a flush runs until Close ends it, and still
	// answers with what is left.
	type result struct {
		left []string
		err  error
	}
	res := make(chan result, 1)
	go func() {
		left, err := Flush(testutil.Ctx(t, 30*time.Second), path, 0, nil)
		res <- result{left, err}
	}()
	<-flushes
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || len(r.left) != 1 {
		t.Errorf("flush ended by Close: %v, %v; want [stuck]", r.left, r.err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket still there after Close: %v", err)
	}
	if _, err := GetStatus(testutil.Ctx(t, 30*time.Second), path, 0); !errors.Is(err, ErrNotRunning) {
		t.Errorf("GetStatus after Close: %v, want ErrNotRunning", err)
	}
}

// TestFlushEndsWhenClientGoes: a client that goes away (Ctrl-C) ends the
// flush it asked for.
func TestFlushEndsWhenClientGoes(t *testing.T) {
	path := filepath.Join(t.TempDir(), SocketName)
	started := make(chan struct{})
	ended := make(chan struct{})
	s, err := Listen(path, Handler{
		Status: func(int) Status { return Status{} },
		Flush: func(ctx context.Context, progress func(Progress)) []string {
			close(started)
			<-ctx.Done()
			close(ended)
			return nil
		},
	}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(testutil.Ctx(t, 30*time.Second))
	go func() {
		<-started
		cancel()
	}()
	if _, err := Flush(ctx, path, 0, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Flush cancelled by the client: %v", err)
	}
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the server's flush went on after the client left")
	}
}

// TestLongSocketPath: a cache directory whose socket path does not fit in
// a unix socket address still gets one.
func TestLongSocketPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, SocketName)
	s, err := Listen(path, Handler{Status: func(int) Status { return Status{Bucket: "long"} }}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st, err := GetStatus(testutil.Ctx(t, 30*time.Second), path, 0); err != nil || st.Bucket != "long" {
		t.Fatalf("GetStatus over a %d-byte path: %+v, %v", len(path), st, err)
	}
}

func TestLookupNotMounted(t *testing.T) {
	dir := t.TempDir()
	if _, err := Lookup(dir); err == nil || !strings.Contains(err.Error(), "nothing is mounted") {
		t.Errorf("Lookup of a plain directory: %v", err)
	}
}
