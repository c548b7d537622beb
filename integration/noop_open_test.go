package integration

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/bucketfs/bucketfs/internal/testutil"
	"golang.org/x/sys/unix"
)

// sentCounts counts, per object, the requests that move or change object
// data: media reads, uploads (a parallel upload's parts and composes
// included), metadata patches, copies and deletions; and requests for an
// object's attributes.
type sentCounts struct {
	mu sync.Mutex
	by map[string]sent // guarded by mu; by object name, "" for a request whose URL names none
	on bool            // guarded by mu
}

// sent is what was sent about one object.
type sent struct{ stats, reads, uploads, patches, others int }

func (s sent) plus(o sent) sent {
	return sent{s.stats + o.stats, s.reads + o.reads, s.uploads + o.uploads, s.patches + o.patches, s.others + o.others}
}

func (s sent) String() string {
	return fmt.Sprintf("stats=%d reads=%d uploads=%d patches=%d others=%d", s.stats, s.reads, s.uploads, s.patches, s.others)
}

func (s *sentCounts) hook(r *http.Request) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.on {
		return 0, false
	}
	var c sent
	p := r.URL.Path
	switch {
	case r.Method == http.MethodGet && (strings.HasPrefix(p, "/download/") || r.URL.Query().Get("alt") == "media"):
		c.reads++
	case r.Method == http.MethodGet && strings.Contains(p, "/o/"):
		c.stats++ // an object's attributes
	case strings.HasPrefix(p, "/upload/"):
		c.uploads++
	case r.Method == http.MethodPatch:
		c.patches++
	case r.Method == http.MethodDelete, r.Method == http.MethodPost:
		c.others++ // compose, copy, rewrite, delete
	default:
		return 0, false
	}
	name := requestObject(r)
	s.by[name] = s.by[name].plus(c)
	return 0, false
}

// requestObject returns the object a JSON API request names in its URL
// (.../o/NAME[/...], or ?name= of an upload), or "" (a multipart upload
// names it in its body).
func requestObject(r *http.Request) string {
	_, rest, ok := strings.Cut(r.URL.EscapedPath(), "/o/")
	if !ok {
		return r.URL.Query().Get("name")
	}
	seg, _, _ := strings.Cut(rest, "/")
	name, err := url.PathUnescape(seg)
	if err != nil {
		return ""
	}
	return name
}

func (s *sentCounts) start() {
	s.mu.Lock()
	s.by, s.on = map[string]sent{}, true
	s.mu.Unlock()
}

// stop stops counting and returns the counts by object.
func (s *sentCounts) stop() map[string]sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on = false
	return s.by
}

// TestOpenWithoutWriteSendsNothing: an open for writing that writes
// nothing, then close, sends nothing; touch (with or without -d) sends
// one metadata patch; neither reads the object nor makes a new
// generation. Small and large files, cached and not, each its own object
// in its own directory (no file is fetched ahead because another of its
// directory was read), all in one mount: the requests are counted per
// object, and the unmount's flush sends whatever is pending. "Large" is
// over --parallel-upload-threshold and several --prefetch-chunk-size
// chunks (both lowered from their defaults, 32 MiB and 8 MiB, so that a
// 3 MiB file takes the paths a 50 MiB one takes with the defaults).
func TestOpenWithoutWriteSendsNothing(t *testing.T) {
	ops := []struct {
		name string
		do   func(t *testing.T, path string)
		want string
	}{
		{"open-close", func(t *testing.T, path string) {
			fd, err := unix.Open(path, unix.O_WRONLY, 0)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if err := unix.Close(fd); err != nil {
				t.Fatalf("close: %v", err)
			}
		}, "reads=0 uploads=0 patches=0 others=0"},
		{"touch", func(t *testing.T, path string) { run(t, "touch", path) }, "reads=0 uploads=0 patches=1 others=0"},
		{"touch-d", func(t *testing.T, path string) { run(t, "touch", "-d", "2001-02-03 04:05:06", path) }, "reads=0 uploads=0 patches=1 others=0"},
	}
	sizes := []int{10 << 10, 3 << 20}
	type file struct {
		op     int
		name   string
		cached bool
		data   []byte
		gen    int64
	}
	emu := startEmulator(t, nil)
	var files []file
	for i, op := range ops {
		for _, size := range sizes {
			for _, cached := range []bool{false, true} {
				f := file{op: i, name: fmt.Sprintf("%s-%d-cached=%v/f", op.name, size, cached), cached: cached}
				f.data = testutil.RandomBytes(size, uint64(size)+7)
				put(t, emu, f.name, f.data)
				f.gen, _ = emu.Generation(testBucket, f.name)
				files = append(files, f)
			}
		}
	}
	counts := &sentCounts{}
	emu.SetHook(counts.hook)
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "0s", "--prefetch-chunk-size", "1MiB", "--parallel-upload-threshold", "1MiB"}})
	for _, f := range files {
		if f.cached {
			if got := readFile(t, m.path(f.name)); sum(got) != sum(f.data) {
				t.Fatalf("%s: the first read got the wrong bytes", f.name)
			}
			// Every chunk was fetched (and counted) for the read.
		} else if _, err := os.Stat(m.path(f.name)); err != nil {
			t.Fatal(err)
		}
	}
	counts.start()
	for _, f := range files {
		ops[f.op].do(t, m.path(f.name))
	}
	m.unmount(t)
	got := counts.stop()
	known := map[string]bool{}
	for _, f := range files {
		known[f.name] = true
	}
	for name, c := range got {
		if !known[name] {
			t.Errorf("requests about %q (\"\": named in no URL) were sent: %s", name, c)
		}
	}
	for _, f := range files {
		// A copy not held whole costs one request for the object's
		// attributes at the open (checkLazy: a version replaced since
		// the lookup answers ESTALE there, where the kernel opens the
		// new version with its size); no bytes move.
		want := "stats=0 " + ops[f.op].want
		if !f.cached {
			want = "stats=1 " + ops[f.op].want
		}
		if c := got[f.name].String(); c != want {
			t.Errorf("%s of %s sent %s, want %s", ops[f.op].name, f.name, c, want)
		}
		if g, _ := emu.Generation(testBucket, f.name); g != f.gen {
			t.Errorf("%s: generation %d after %s, want %d (unchanged)", f.name, g, ops[f.op].name, f.gen)
		}
		if o, _ := emu.Object(testBucket, f.name); sum(o.Content) != sum(f.data) {
			t.Errorf("%s: the object's bytes changed", f.name)
		}
	}
}

// run runs a command, failing the test if it fails.
func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
}
