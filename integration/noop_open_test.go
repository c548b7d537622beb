package integration

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/bucketfs/bucketfs/internal/testutil"
	"golang.org/x/sys/unix"
)

// sentCounts counts the requests that move or change object data: media
// reads, uploads (a parallel upload's parts and composes included),
// metadata patches, copies and deletions.
type sentCounts struct {
	mu                                     sync.Mutex
	stats, reads, uploads, patches, others int
	on                                     bool
}

func (s *sentCounts) hook(r *http.Request) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.on {
		return 0, false
	}
	p := r.URL.Path
	switch {
	case r.Method == http.MethodGet && (strings.HasPrefix(p, "/download/") || r.URL.Query().Get("alt") == "media"):
		s.reads++
	case r.Method == http.MethodGet && strings.Contains(p, "/o/"):
		s.stats++ // an object's attributes
	case strings.HasPrefix(p, "/upload/"):
		s.uploads++
	case r.Method == http.MethodPatch:
		s.patches++
	case r.Method == http.MethodDelete, r.Method == http.MethodPost:
		s.others++ // compose, copy, rewrite, delete
	}
	return 0, false
}

func (s *sentCounts) start() {
	s.mu.Lock()
	s.stats, s.reads, s.uploads, s.patches, s.others, s.on = 0, 0, 0, 0, 0, true
	s.mu.Unlock()
}

func (s *sentCounts) stop() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on = false
	return fmt.Sprintf("stats=%d reads=%d uploads=%d patches=%d others=%d", s.stats, s.reads, s.uploads, s.patches, s.others)
}

// TestOpenWithoutWriteSendsNothing: an open for writing that writes
// nothing, then close, sends nothing; touch (with or without -d) sends
// one metadata patch; neither reads the object nor makes a new
// generation. Small and 50 MiB files, cached and not. Each case ends
// with an unmount, whose flush sends whatever is pending.
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
	sizes := []int{10 << 10, 50 << 20}
	emu := startEmulator(t, nil)
	counts := &sentCounts{}
	emu.SetHook(counts.hook)
	for _, op := range ops {
		for _, size := range sizes {
			for _, cached := range []bool{false, true} {
				name := fmt.Sprintf("%s-%d-cached=%v", op.name, size, cached)
				t.Run(name, func(t *testing.T) {
					data := testutil.RandomBytes(size, uint64(size)+7)
					put(t, emu, name, data)
					gen, _ := emu.Generation(testBucket, name)
					m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "0s"}})
					if cached {
						if got := readFile(t, m.path(name)); sum(got) != sum(data) {
							t.Fatal("the first read got the wrong bytes")
						}
						// Every chunk was fetched (and counted) for the read.
					} else if _, err := os.Stat(m.path(name)); err != nil {
						t.Fatal(err)
					}
					counts.start()
					op.do(t, m.path(name))
					m.unmount(t)
					// A copy not held whole costs one request for the
					// object's attributes at the open (checkLazy: a
					// version replaced since the lookup answers ESTALE
					// there, where the kernel opens the new version with
					// its size); no bytes move.
					want := "stats=0 " + op.want
					if !cached {
						want = "stats=1 " + op.want
					}
					if got := counts.stop(); got != want {
						t.Errorf("%s sent %s, want %s", op.name, got, want)
					}
					if g, _ := emu.Generation(testBucket, name); g != gen {
						t.Errorf("generation %d after %s, want %d (unchanged)", g, op.name, gen)
					}
					if got, _ := emu.Object(testBucket, name); sum(got.Content) != sum(data) {
						t.Errorf("the object's bytes changed")
					}
				})
			}
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
