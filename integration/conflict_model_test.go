package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
)

// The conflict model: a file is changed through the mount and another
// client overwrites (or creates) the object at some step of the upload's
// life. From the first byte written to the end of the conflict, reads
// and stats of the path are sampled without pause; each sample must be
// one whole version, the same by stat before, read, and stat after: the
// local version until the upload is refused, then the remote one (the
// local one is saved beside the path). Never empty, never an error,
// never the base, never the local version again once the remote one was
// seen.

// conflictVersions are the contents a sample may be, all of different
// sizes so that a size names a version.
var conflictVersions = struct{ base, local, remote, again []byte }{
	base:   []byte("the base version, 33 bytes long.\n"),
	local:  []byte("local version (20)\n\n"),
	remote: []byte("remote (14)\n\n\n"),
	again:  []byte("again (9)"), // a second remote write, after the refusal
}

// conflictSample is one look at the path.
type conflictSample struct {
	size1, size2 int64  // stat before and after the read
	listed       int64  // the size a listing of the directory shows (-1: not listed)
	data         []byte // the read
	err          error
}

func (s conflictSample) String() string {
	return fmt.Sprintf("stat %d, read %d bytes %q, stat %d, listed %d, err %v", s.size1, len(s.data), s.data, s.size2, s.listed, s.err)
}

// sampleConflict looks at path once.
func sampleConflict(path string) conflictSample {
	s := conflictSample{size1: -1, size2: -1, listed: -1}
	var st syscall.Stat_t
	if s.err = syscall.Stat(path, &st); s.err != nil {
		return s
	}
	s.size1 = st.Size
	if s.data, s.err = os.ReadFile(path); s.err != nil {
		return s
	}
	if s.err = syscall.Stat(path, &st); s.err != nil {
		return s
	}
	s.size2 = st.Size
	ents, err := os.ReadDir(strings.TrimSuffix(path, "/"+lastSegment(path)))
	if err != nil {
		s.err = err
		return s
	}
	for _, e := range ents {
		if e.Name() == lastSegment(path) {
			if fi, err := e.Info(); err == nil {
				s.listed = fi.Size()
			}
		}
	}
	return s
}

func lastSegment(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// sizeVersion names the version a size belongs to ("" if none).
func sizeVersion(size int64) string {
	switch size {
	case int64(len(conflictVersions.local)):
		return "local"
	case int64(len(conflictVersions.remote)):
		return "remote"
	case int64(len(conflictVersions.again)):
		return "again"
	}
	return ""
}

// dataVersion names the version bytes are ("" if none).
func dataVersion(b []byte) string {
	switch {
	case bytes.Equal(b, conflictVersions.local):
		return "local"
	case bytes.Equal(b, conflictVersions.remote):
		return "remote"
	case bytes.Equal(b, conflictVersions.again):
		return "again"
	}
	return ""
}

// versionRank orders the versions as they were made.
var versionRank = map[string]int{"local": 1, "remote": 2, "again": 3}

// checkConflictSamples checks the looks in the order they were made
// (stat, read, stat, listing of each sample): each one whole allowed
// version, never an older one after a newer one (local, remote, then
// the second remote write if any). A sample may straddle a change (a
// stat of the local version, then a read of the remote one), never the
// other way.
func checkConflictSamples(t *testing.T, samples []conflictSample) {
	t.Helper()
	seenRemote, newest := false, 0
	counts := map[string]int{}
	for i, s := range samples {
		looks := []string{sizeVersion(s.size1), dataVersion(s.data), sizeVersion(s.size2)}
		if s.listed != -1 {
			looks = append(looks, sizeVersion(s.listed))
		}
		for _, v := range looks {
			counts[v]++
			switch {
			case s.err != nil || v == "":
				t.Errorf("sample %d of %d is not one whole allowed version: %v", i, len(samples), s)
			case versionRank[v] < newest:
				t.Errorf("sample %d of %d goes back to an older version (%s): %v", i, len(samples), v, s)
			}
			if s.err != nil || v == "" || versionRank[v] < newest {
				break
			}
			newest = versionRank[v]
			seenRemote = seenRemote || v != "local"
		}
	}
	if !seenRemote {
		t.Errorf("the remote version was never shown after the conflict")
	}
	t.Logf("%d samples, looks: %v", len(samples), counts)
}

// TestModelConflict runs the conflict at each step of the upload's life.
func TestModelConflict(t *testing.T) {
	steps := []struct {
		name    string
		newFile bool // the file is created here (no base)
		hold    bool // the remote write happens while the upload is held at the server
		again   bool // and another one between the refusal and the next lookup
	}{
		{name: "before-the-delay-ends"},
		{name: "again-after-the-refusal", again: true},
		{name: "new-file-before-the-delay-ends", newFile: true},
		{name: "during-the-upload", hold: true},
		{name: "new-file-during-the-upload", newFile: true, hold: true},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) { runConflictStep(t, step.newFile, step.hold, step.again) })
	}
}

func runConflictStep(t *testing.T, newFile, hold, again bool) {
	emu := startEmulator(t, nil)
	const name = "dir/shared.txt"
	put(t, emu, "dir/other", []byte("x"))
	if !newFile {
		put(t, emu, name, conflictVersions.base)
	}
	held := newUploadHold(emu, name, hold)
	delay := "1s"
	if hold {
		delay = "0s"
	}
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", delay}})
	path := m.path(name)
	if !newFile {
		if got := readFile(t, path); !bytes.Equal(got, conflictVersions.base) {
			t.Fatalf("the base reads %q", got)
		}
	} else if _, err := os.ReadDir(m.path("dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, conflictVersions.local, 0o644); err != nil {
		t.Fatal(err)
	}
	var samples []conflictSample
	look := func() { samples = append(samples, sampleConflict(path)) }
	look()
	if hold {
		held.waitHeld(t, look)
	}
	put(t, emu, name, conflictVersions.remote) // the other client
	held.release()
	// Sample until the conflict copy exists, then for a while more
	// (the time between the refusal and the next lookup).
	deadline := time.Now().Add(60 * time.Second)
	for len(listObjects(t, emu, name+".bucketfs-conflict-")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no conflict copy within 60s; samples: %v", samples)
		}
		look()
	}
	if again {
		look()
		put(t, emu, name, conflictVersions.again)
	}
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
		look()
	}
	checkConflictSamples(t, samples)
	sib := listObjects(t, emu, name+".bucketfs-conflict-")
	if len(sib) != 1 || !bytes.Equal(object(t, emu, sib[0]), conflictVersions.local) {
		var got []string
		for _, o := range sib {
			got = append(got, fmt.Sprintf("%s: %q", o, object(t, emu, o)))
		}
		t.Errorf("conflict copies %v, want one with the local version", got)
	}
	m.unmount(t)
	want := conflictVersions.remote
	if again {
		want = conflictVersions.again
	}
	if got := object(t, emu, name); !bytes.Equal(got, want) {
		t.Errorf("the bucket's %s = %q, want %q", name, got, want)
	}
}

// uploadHold holds the first upload of one object at the server until
// released.
type uploadHold struct {
	once     sync.Once
	held     chan struct{} // closed when the upload arrived
	released chan struct{}
}

func newUploadHold(emu *emulator.Server, name string, on bool) *uploadHold {
	h := &uploadHold{held: make(chan struct{}), released: make(chan struct{})}
	if !on {
		h.once.Do(func() { close(h.released) })
		return h
	}
	var first sync.Once
	emu.SetHook(func(r *http.Request) (int, bool) {
		if !isUploadReq(r) || !strings.Contains(r.URL.RawQuery, "ifGenerationMatch") && !strings.Contains(r.URL.RawQuery, "ifGeneration") {
			return 0, false
		}
		isOurs := false
		first.Do(func() { isOurs = true })
		if !isOurs {
			return 0, false
		}
		close(h.held)
		select {
		case <-h.released:
		case <-r.Context().Done():
		}
		return 0, false // now on to the fake, which refuses it (412)
	})
	return h
}

// waitHeld waits until the upload is held, calling look meanwhile.
func (h *uploadHold) waitHeld(t *testing.T, look func()) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-h.held:
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the upload did not arrive within 60s")
		}
		look()
	}
}

func (h *uploadHold) release() { h.once.Do(func() { close(h.released) }) }

// TestConflictThenAnotherVersion is the rare order the model above met
// once in CI: after a write conflict, the object changes again before the
// kernel has let go of the superseded node. An open through that node
// answers ESTALE and the kernel looks the name up once more; that lookup
// must find the newest version, not the one the conflict found (which the
// directory's cached listing holds): the kernel does not retry a second
// ESTALE, and the application would get it. The window (between the local
// copy leaving the name and the kernel being told to drop the node) is
// widened to a second by a test hook (internal/testhook).
func TestConflictThenAnotherVersion(t *testing.T) {
	emu := startEmulator(t, nil)
	const name = "dir/shared.txt"
	put(t, emu, name, conflictVersions.base)
	m := mount(t, emu, mountOpts{
		args: []string{"--write-back-delay", "1s", "--log-level", "debug"},
		env:  []string{"BUCKETFS_TEST_PAUSE=fs.conflict-notify=1s"},
	})
	path := m.path(name)
	if got := readFile(t, path); !bytes.Equal(got, conflictVersions.base) {
		t.Fatalf("the base reads %q", got)
	}
	if _, err := os.ReadDir(m.path("dir")); err != nil { // a cached listing
		t.Fatal(err)
	}
	// Once the mount has asked what the name is after its conflict copy
	// is saved (the remote version), another client writes it again.
	again := make(chan struct{})
	var once sync.Once
	emu.SetAfterHook(func(r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/o/"+name) { // Path is unescaped
			return
		}
		if len(listObjects(t, emu, name+".bucketfs-conflict-")) == 0 {
			return
		}
		once.Do(func() {
			put(t, emu, name, conflictVersions.again)
			close(again)
		})
	})
	if err := os.WriteFile(path, conflictVersions.local, 0o644); err != nil {
		t.Fatal(err)
	}
	put(t, emu, name, conflictVersions.remote)
	select {
	case <-again:
	case <-time.After(60 * time.Second):
		t.Fatal("the mount did not ask for the name after its conflict within 60s")
	}
	// Reads open the path: the local version until its copy leaves the
	// name, then, through the superseded node's ESTALE, the newest one.
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read after the second remote write: %v", err)
		}
		if v := dataVersion(b); v == "again" {
			break
		} else if v != "local" {
			t.Fatalf("read %q (%s), want the local version, then the newest one", b, v)
		}
		if time.Now().After(deadline) {
			t.Fatal("the local version still shows 30s after the conflict")
		}
	}
	// The superseded node answers ESTALE either because it is marked
	// superseded (conflict.go), or, when the open checked that mark while
	// the local copy still held the name and found the copy gone by the
	// time it opened the cache, because its version is gone from the
	// bucket (file.go's staleAtOpen). Both make the kernel look the name
	// up again, which is what is tested here.
	if logs := m.logs.String(); !strings.Contains(logs, "superseded by a write conflict") &&
		!strings.Contains(logs, "the version a file was opened at is gone from the bucket") {
		t.Error("no open reached the superseded node: the case was not tested")
	}
}
