package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
)

// A save by rename whose previous save's upload is answered while the
// rename is on its way. The emulator holds the answer of each upload of
// final (it took effect: the bucket has the new generation) until the
// next save's rename has started, then lets it go after a delay swept
// across the saves. The cache is over its cap once the kernel has
// written tmp (passthrough writes pass it until the close), so the
// upload's settling evicts final's clean copy at once. One writer, no
// one else: the bucket must end with the last save and no conflict
// copy. Before the cache remembered the versions it uploaded when their
// copies left the index (cache/madecopies.go), the rename was based on
// the lookup made before the upload was confirmed, and one save in the
// sweep went beside the name as a conflict copy.
func TestSaveByRenameAsPreviousUploadLands(t *testing.T) {
	emu := startEmulator(t, nil)
	var armed atomic.Bool
	var lastGen atomic.Int64
	landed := make(chan struct{}, 1)
	release := make(chan struct{})
	emu.SetAfterHook(func(r *http.Request) {
		if !armed.Load() {
			return
		}
		g, err := emu.Generation(testBucket, "final")
		if err != nil || g == lastGen.Swap(g) {
			return
		}
		landed <- struct{}{} // the upload took effect; its answer waits
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	// tmp's uploads wait until its rename is done: its copy stays dirty,
	// so it is not evicted (a rename of an evicted tmp must fetch it back,
	// and with final's changes there is no room: ENOSPC, not this test's
	// subject).
	var tmpGate atomic.Pointer[chan struct{}]
	emu.SetHook(func(r *http.Request) (int, bool) {
		g := tmpGate.Load()
		if g == nil || !isUploadReq(r) || r.URL.Query().Get("name") != "tmp" {
			return 0, false
		}
		select {
		case <-*g:
		case <-r.Context().Done():
		}
		return 0, false
	})
	m := mount(t, emu, mountOpts{args: []string{"--cache-max-size", "32MiB", "--write-back-delay", "0s", "--cache-full-wait", "30s"}})
	armed.Store(true)
	delays := []time.Duration{0, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond,
		5 * time.Millisecond, 8 * time.Millisecond, 12 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}
	const saves = 21
	var last []byte
	for i := range saves {
		last = testutil.RandomBytes(20*mib, uint64(9100+i))
		gate := make(chan struct{})
		tmpGate.Store(&gate)
		if got, err := writeFileAcked(m.path("tmp"), last); err != nil || len(got) != len(last) {
			t.Fatalf("save %d: writing tmp: %v", i, err)
		}
		held := i > 0 && armed.Load()
		if held {
			select {
			case <-landed: // save i-1's upload is in the bucket, unanswered
			case <-time.After(30 * time.Second):
				// Not uploaded at final: saved beside it (checked below).
				t.Errorf("save %d: save %d's upload never reached final", i, i-1)
				held = false
				armed.Store(false)
			}
		}
		done := make(chan error, 1)
		go func() { done <- os.Rename(m.path("tmp"), m.path("final")) }()
		if held {
			time.Sleep(delays[(i-1)%len(delays)])
			release <- struct{}{}
		}
		err := <-done
		close(gate)
		if err != nil {
			t.Fatalf("save %d: rename: %v", i, err)
		}
	}
	tmpGate.Store(nil)
	armed.Store(false)
	go func() { // the last save's upload, if it was held
		for {
			select {
			case <-landed:
				release <- struct{}{}
			case <-time.After(2 * time.Minute):
				return
			}
		}
	}()
	if got, err := os.ReadFile(m.path("final")); err != nil || !bytes.Equal(got, last) {
		t.Errorf("final reads %d bytes (%v), not the last save, before the unmount", len(got), err)
	}
	m.unmount(t)
	var copies []string
	for _, o := range listObjects(t, emu, "") {
		if strings.Contains(o, ".bucketfs-conflict-") {
			copies = append(copies, o)
		}
	}
	if got := object(t, emu, "final"); !bytes.Equal(got, last) {
		which := "none of the saves"
		for i := range saves {
			if bytes.Equal(got, testutil.RandomBytes(20*mib, uint64(9100+i))) {
				which = fmt.Sprintf("save %d", i)
			}
		}
		t.Errorf("the bucket's final holds %s, want the last save (%d)", which, saves-1)
	}
	if len(copies) > 0 {
		t.Errorf("conflict copies of a single writer's saves: %q", copies)
	}
}
