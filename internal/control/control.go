// Package control lets the commands 'bucketfs status' and 'bucketfs
// flush' talk to a running mount.
//
// The mount listens on a unix socket, CACHE_DIR/control.sock (mode 0600;
// a stale one left by a crash is replaced; removed at exit), and answers
// only processes of its own user or root (checked with SO_PEERCRED). It
// also records the socket's path under RunDir, in a file named after the
// mountpoint, so that a command given only the mountpoint finds it (see
// Register and Lookup).
//
// The protocol is line-delimited JSON, one request per connection: the
// client sends one Request line; the server answers with Reply lines and
// closes. "status" gets one Reply with Status set. "flush" gets a Reply
// with Progress set whenever the amount left changes, then a last Reply
// with Done set and Left naming the files still not in the bucket (none
// when the flush finished). "resolve" ends the hold on a file that failed
// its checksum check (Object; KeepLocal or not) and gets one Reply with
// Done set (and Saved, where the local bytes were kept). "warm" and
// "unpin" are described in warm.go. A Reply with Error set ends any
// exchange. A
// flush ends when everything is in the bucket, when its timeout ends, or
// when the client goes away; it never stops the mount.
package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SocketName is the socket's name in the cache directory.
const SocketName = "control.sock"

// Request is what a client asks.
type Request struct {
	Cmd     string        `json:"cmd"`               // "status", "flush" or "resolve"
	Timeout time.Duration `json:"timeout,omitempty"` // flush: how long to wait (0: until done or the client goes)
	// MaxDirty is how many dirty files a status lists (0: DefaultMaxDirty).
	MaxDirty int `json:"max_dirty,omitempty"`
	// Object and KeepLocal: resolve's file (an object name) and choice.
	Object    string `json:"object,omitempty"`
	KeepLocal bool   `json:"keep_local,omitempty"`
	// Prefixes, Parallelism and Pin: warm's and unpin's objects (names
	// or directories, "" for all) and warm's choices (warm.go).
	Prefixes    []string `json:"prefixes,omitempty"`
	Parallelism int      `json:"parallelism,omitempty"`
	Pin         bool     `json:"pin,omitempty"`
}

// DefaultMaxDirty is how many dirty files a status lists unless asked.
const DefaultMaxDirty = 20

// Reply is one line of an answer.
type Reply struct {
	Status   *Status     `json:"status,omitempty"`
	Progress *Progress   `json:"progress,omitempty"`
	Done     bool        `json:"done,omitempty"`
	Left     []string    `json:"left,omitempty"`
	Saved    string      `json:"saved,omitempty"`    // resolve: where the local bytes were kept
	Warm     *WarmReport `json:"warm,omitempty"`     // warm: progress, and with Done the result
	Unpinned *Unpinned   `json:"unpinned,omitempty"` // unpin: what it unpinned
	Error    string      `json:"error,omitempty"`
}

// Progress is what a flush still has to send.
type Progress struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// Status describes a running mount.
type Status struct {
	Version    string    `json:"version"`
	PID        int       `json:"pid"`
	Bucket     string    `json:"bucket"`
	Mountpoint string    `json:"mountpoint"`
	CacheDir   string    `json:"cache_dir"`
	Started    time.Time `json:"started"`
	// Flushing: the file system is unmounted, and the process sends its
	// changes to the bucket before it exits (and gives the cache
	// directory up).
	Flushing bool `json:"flushing,omitempty"`

	// The bucket's reachability (the client's circuit breaker): Offline
	// since OfflineSince, for OfflineCause; changes wait meanwhile.
	// OnlineSince is when it came back from the last outage (zero: none).
	Offline      bool      `json:"offline"`
	OfflineSince time.Time `json:"offline_since,omitzero"`
	OfflineCause string    `json:"offline_cause,omitempty"`
	OnlineSince  time.Time `json:"online_since,omitzero"`

	// The bucket's change notifications (--notify-topic,
	// --notify-subscription): NotifyOn if configured; NotifyLive while
	// received (what the mount knows is current), else down since
	// NotifySince for NotifyWhy (the metadata TTL holds meanwhile).
	NotifyOn           bool      `json:"notify_on,omitempty"`
	NotifyLive         bool      `json:"notify_live,omitempty"`
	NotifySince        time.Time `json:"notify_since,omitzero"`
	NotifyWhy          string    `json:"notify_why,omitempty"`
	NotifySubscription string    `json:"notify_subscription,omitempty"`

	// Cache use.
	UsedBytes int64 `json:"used_bytes"`
	MaxBytes  int64 `json:"max_bytes"`
	Entries   int   `json:"entries"`
	Hits      int64 `json:"hits"`
	Misses    int64 `json:"misses"`
	Uncached  int64 `json:"uncached"`
	Evictions int64 `json:"evictions"`
	ReadBytes int64 `json:"read_bytes"`
	// Small files fetched ahead of their open: bytes opened since, and
	// bytes that left the cache unopened.
	PrefetchUsedBytes   int64 `json:"prefetch_used_bytes"`
	PrefetchWastedBytes int64 `json:"prefetch_wasted_bytes"`
	// The cache's disk: its free space now, and the floor kept free
	// (--cache-min-free; 0: none).
	DiskFreeBytes int64 `json:"disk_free_bytes"`
	MinFreeBytes  int64 `json:"min_free_bytes"`

	// Write-back.
	DirtyFiles     int         `json:"dirty_files"`
	DirtyBytes     int64       `json:"dirty_bytes"`
	OldestDirty    time.Time   `json:"oldest_dirty,omitzero"`
	Dirty          []DirtyFile `json:"dirty,omitempty"` // oldest first, at most Request.MaxDirty
	Queued         int         `json:"queued"`
	Uploads        int64       `json:"uploads"`
	UploadFailures int64       `json:"upload_failures"`
	Conflicts      int64       `json:"conflicts"`

	// Transfers in flight.
	Uploading      int   `json:"uploading"`       // uploads and deletions being sent
	Downloading    int   `json:"downloading"`     // object downloads running
	BucketRequests int64 `json:"bucket_requests"` // calls to the bucket running (all kinds)

	Errors []ErrorEvent `json:"errors,omitempty"` // recent, oldest first

	// Integrity (cache/checksum.go).
	ChecksumMismatches int64      `json:"checksum_mismatches"`
	Held               []HeldFile `json:"held,omitempty"` // changed files held for a failed check, or an upload refused as invalid
	// Refused: changed files whose last upload the bucket refused in a
	// way a person can fix (permission, credentials, a missing bucket).
	Refused []RefusedFile `json:"refused,omitempty"`

	// Pinned copies ('bucketfs warm --pin'), counted in UsedBytes.
	PinnedFiles int   `json:"pinned_files"`
	PinnedBytes int64 `json:"pinned_bytes"`
}

// HeldFile is a changed file held because it failed its checksum check:
// not uploaded, not removed, until 'bucketfs resolve'.
type HeldFile struct {
	Name string `json:"name"`
	Why  string `json:"why"`
}

// RefusedFile is a changed file whose last upload the bucket refused in
// a way a person can fix; it is tried again every few minutes.
type RefusedFile struct {
	Name  string    `json:"name"`
	Since time.Time `json:"since"`
	Why   string    `json:"why"`
}

// DirtyFile is one file with changes not yet in the bucket.
type DirtyFile struct {
	Name      string    `json:"name"`
	Size      int64     `json:"size"`
	Since     time.Time `json:"since"`
	Deleted   bool      `json:"deleted,omitempty"`
	Uploading bool      `json:"uploading,omitempty"`
}

// ErrorEvent is one recent failure.
type ErrorEvent struct {
	Time   time.Time `json:"time"`
	Op     string    `json:"op"`
	Object string    `json:"object"`
	Err    string    `json:"err"`
}

// Handler is what the server calls. Both functions are called on the
// connection's goroutine, possibly by several connections at once.
type Handler struct {
	// Status returns a snapshot listing at most maxDirty dirty files.
	Status func(maxDirty int) Status
	// Flush uploads every change and waits until none is left or ctx
	// ends, calling progress as the amount left changes; it returns the
	// names still not in the bucket.
	Flush func(ctx context.Context, progress func(Progress)) []string
	// Resolve ends the hold on a file that failed its checksum check; it
	// returns where the local bytes were kept, if they were dropped.
	Resolve func(ctx context.Context, object string, keepLocal bool) (saved string, err error)
	// Warm and Unpin: see warm.go.
	Warm  WarmFunc
	Unpin func(prefixes []string) (files int, bytes int64)
}

// Server answers requests on the control socket.
//
// LOCK ORDER: Server.mu is a leaf: nothing else is locked under it, and
// it is never held while a request is handled or a reply is written.
type Server struct {
	ln   *net.UnixListener
	path string
	h    Handler
	log  *slog.Logger
	uid  int

	ctx    context.Context // ends at Close: running flushes stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop and the connections

	mu    sync.Mutex
	conns map[net.Conn]struct{} // guarded by mu: open connections, closed by Close
}

// Listen removes whatever is at path (a socket left by a crash: the
// caller holds the cache directory, so no live mount uses it), listens
// there with mode 0600, and serves h until Close.
func Listen(path string, h Handler, log *slog.Logger) (*Server, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale control socket: %w", err)
	}
	addr, done, err := socketAddr(path)
	if err != nil {
		return nil, err
	}
	defer done()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln.SetUnlinkOnClose(false) // Close removes path itself (addr may be a /proc alias)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		os.Remove(path)
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{ln: ln, path: path, h: h, log: log, uid: os.Geteuid(), ctx: ctx, cancel: cancel,
		conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

// Path is where the socket is.
func (s *Server) Path() string { return s.path }

// Close stops listening, ends running requests (a flush in progress
// answers with what is left), waits for them, and removes the socket.
func (s *Server) Close() error {
	s.cancel()
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.SetReadDeadline(time.Now()) // a client that sends nothing does not hold Close
	}
	s.mu.Unlock()
	s.wg.Wait()
	if rerr := os.Remove(s.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = rerr
	}
	return err
}

func (s *Server) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Error("control socket stopped accepting", "err", err)
			}
			return
		}
		s.mu.Lock()
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.handle(c)
		}()
	}
}

// handle answers one request on c.
func (s *Server) handle(c *net.UnixConn) {
	enc := json.NewEncoder(c)
	reply := func(r Reply) bool {
		c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		return enc.Encode(r) == nil
	}
	if uid, err := peerUID(c); err != nil || (uid != 0 && uid != s.uid) {
		reply(Reply{Error: "permission denied: only root or the user running the mount may use its control socket"})
		return
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		reply(Reply{Error: "bad request: " + err.Error()})
		return
	}
	switch req.Cmd {
	case "status":
		n := req.MaxDirty
		if n <= 0 {
			n = DefaultMaxDirty
		}
		st := s.h.Status(n)
		reply(Reply{Status: &st})
	case "flush":
		ctx, cancel := context.WithCancel(s.ctx)
		defer cancel()
		if req.Timeout > 0 {
			ctx, cancel = context.WithTimeout(ctx, req.Timeout)
			defer cancel()
		}
		// The client closing its end (Ctrl-C) ends the flush.
		readDone := make(chan struct{})
		go func() {
			defer close(readDone)
			var b [1]byte
			c.Read(b[:])
			cancel()
		}()
		s.log.Info("flush asked on the control socket")
		left := s.h.Flush(ctx, func(p Progress) {
			if !reply(Reply{Progress: &p}) {
				cancel()
			}
		})
		reply(Reply{Done: true, Left: left})
		c.SetReadDeadline(time.Now()) // ends the reader above
		<-readDone
	case "resolve":
		if s.h.Resolve == nil {
			reply(Reply{Error: "this mount cannot resolve held files"})
			return
		}
		s.log.Info("resolve asked on the control socket", "object", req.Object, "keep_local", req.KeepLocal)
		saved, err := s.h.Resolve(s.ctx, req.Object, req.KeepLocal)
		if err != nil {
			reply(Reply{Error: err.Error(), Saved: saved})
			return
		}
		reply(Reply{Done: true, Saved: saved})
	case "warm":
		s.handleWarm(c, req, reply)
	case "unpin":
		s.handleUnpin(req, reply)
	default:
		reply(Reply{Error: fmt.Sprintf("unknown command %q", req.Cmd)})
	}
}

// peerUID is the user of the process at the other end of c.
func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var cerr error
	err = raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}

// maxSunPath is the room for a path in a unix socket address, less its
// terminating zero.
const maxSunPath = 107

// socketAddr returns an address for the socket at path: path itself, or,
// when it is too long for a unix socket address, the same file reached
// through /proc/self/fd of its directory. done releases that directory.
func socketAddr(path string) (string, func(), error) {
	if len(path) <= maxSunPath {
		return path, func() {}, nil
	}
	fd, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("control socket directory: %w", err)
	}
	alias := fmt.Sprintf("/proc/self/fd/%d/%s", fd, filepath.Base(path))
	if len(alias) > maxSunPath {
		unix.Close(fd)
		return "", nil, fmt.Errorf("control socket name %q is too long", filepath.Base(path))
	}
	return alias, func() { unix.Close(fd) }, nil
}

// Call sends req to the socket at path and calls each for every reply
// line until the server closes; ctx bounds the whole exchange.
func Call(ctx context.Context, path string, req Request, each func(Reply) error) error {
	addr, done, err := socketAddr(path)
	if err != nil {
		return err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", addr)
	done()
	if err != nil {
		switch {
		case errors.Is(err, syscall.ENOENT):
			return fmt.Errorf("no control socket at %s: %w", path, ErrNotRunning)
		case errors.Is(err, syscall.ECONNREFUSED):
			return fmt.Errorf("nothing listens on %s (a mount that crashed?): %w", path, ErrNotRunning)
		}
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	line, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := c.Write(append(line, '\n')); err != nil {
		return ctxErr(ctx, err)
	}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var r Reply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("bad reply from the mount: %w", err)
		}
		if r.Error != "" {
			return errors.New(r.Error)
		}
		if err := each(r); err != nil {
			return err
		}
	}
	return ctxErr(ctx, sc.Err())
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// ErrNotRunning means no mount answers on the socket.
var ErrNotRunning = errors.New("the mount is not running")

// GetStatus asks the mount at socket path for its status.
func GetStatus(ctx context.Context, path string, maxDirty int) (Status, error) {
	var st *Status
	err := Call(ctx, path, Request{Cmd: "status", MaxDirty: maxDirty}, func(r Reply) error {
		st = r.Status
		return nil
	})
	if err == nil && st == nil {
		err = errors.New("the mount sent no status")
	}
	if err != nil {
		return Status{}, err
	}
	return *st, nil
}

// Flush asks the mount at socket path to upload every change, waiting
// up to timeout (0: until done), and calls progress with what is left. It
// returns the names still not in the bucket.
func Flush(ctx context.Context, path string, timeout time.Duration, progress func(Progress)) ([]string, error) {
	var left []string
	done := false
	err := Call(ctx, path, Request{Cmd: "flush", Timeout: timeout}, func(r Reply) error {
		if r.Progress != nil && progress != nil {
			progress(*r.Progress)
		}
		if r.Done {
			done, left = true, r.Left
		}
		return nil
	})
	if err == nil && !done {
		err = errors.New("the mount ended the flush without an answer (unmounting?)")
	}
	return left, err
}

// Resolve asks the mount at socket path to end the hold on object, a file
// that failed its checksum check: keepLocal uploads the local bytes as
// they are; otherwise the bucket's version is taken and the path where
// the local bytes were kept is returned.
func Resolve(ctx context.Context, path, object string, keepLocal bool) (string, error) {
	var saved string
	done := false
	err := Call(ctx, path, Request{Cmd: "resolve", Object: object, KeepLocal: keepLocal}, func(r Reply) error {
		saved, done = r.Saved, r.Done
		return nil
	})
	if err == nil && !done {
		err = errors.New("the mount sent no answer (unmounting?)")
	}
	return saved, err
}
