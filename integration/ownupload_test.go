package integration

import (
	"bytes"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRenameOverUploadingFile: a file renamed over another whose upload
// is on its way. The replaced content lands in the bucket after the
// rename, so the renamed file's upload is based on that version, not on
// the one the kernel's node had when it moved; then the renamed file is
// opened for writing through that node. The open must find the version
// this mount uploaded: before, the node kept the generation from before
// the replaced upload, every open answered ESTALE, and the kernel's new
// lookup found the same node again, so the application got ESTALE (the
// model tester, seed 1795802702956144187). Nor may the daemon meet that
// version as gone once (an ESTALE the kernel's retry hides).
func TestRenameOverUploadingFile(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "0s", "--metadata-ttl", "1m"}})
	v1, v2 := []byte("first version of b"), []byte("second version of b, replaced before it lands")
	a := bytes.Repeat([]byte("content of a "), 100)
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(m.path(name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	landed := func(name string, data []byte) {
		t.Helper()
		pollUntil(t, 30*time.Second, name+" in the bucket", func() bool { return bytes.Equal(object(t, emu, name), data) })
	}
	write("b", v1)
	landed("b", v1)
	write("a", a)
	landed("a", a)

	// Hold b's next upload in the emulator until a is renamed over b.
	arrived, release := make(chan struct{}), make(chan struct{})
	var once atomic.Bool // the hooks run on the emulator's goroutines
	emu.SetHook(func(r *http.Request) (int, bool) {
		if !isUploadReq(r) || r.URL.Query().Get("name") != "b" || once.Swap(true) {
			return 0, false
		}
		close(arrived)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return 0, false
	})
	t.Cleanup(func() { emu.SetHook(nil) })
	write("b", v2)
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("b's second version was not sent within 30s")
	}
	err := os.Rename(m.path("a"), m.path("b"))
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	landed("b", a) // v2 landed, then a's content over it

	f, err := os.OpenFile(m.path("b"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatalf("opening b, renamed here and uploaded: %v", err)
	}
	if _, err := f.Write([]byte("!")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	m.unmount(t)
	// Not even once: the kernel would retry the open after an ESTALE
	// and hide it, but the node is to follow its content's base all along.
	if strings.Contains(m.logs.String(), "is gone from the bucket") {
		t.Error("an open met the version b's content replaced as gone (the node did not follow the base)")
	}
	if got := listObjects(t, emu, ""); strings.Join(got, " ") != "b" {
		t.Errorf("the bucket holds %q, want b only", got)
	}
	if got := object(t, emu, "b"); !bytes.Equal(got, append(bytes.Clone(a), '!')) {
		t.Errorf("b holds %q", got)
	}
}
