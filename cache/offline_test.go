package cache

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// While the bucket is offline no upload starts (nothing is sent, nothing
// fails); once it is back the queued change goes up by itself.
func TestUploadsWaitWhileOffline(t *testing.T) {
	e := newEnv(t)
	online := make(chan struct{}) // open: offline
	o := e.opts(64 << 20)
	o.Online = func() <-chan struct{} { return online }
	c, err := Open(o, e.b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	before := e.emu.Requests()
	e.write(c, transfer.ObjectAttrs{Name: "new.txt"}, true, 0, []byte("made offline"))
	// A flush while offline ends at its deadline with the change named.
	ctx, cancel := context.WithTimeout(e.ctx, 500*time.Millisecond)
	left := c.Flush(ctx, nil)
	cancel()
	if !slices.Equal(left, []string{"new.txt"}) {
		t.Fatalf("flush while offline left %v, want [new.txt]", left)
	}
	if n := e.emu.Requests() - before; n != 0 {
		t.Errorf("%d requests sent while offline, want 0", n)
	}
	if st := c.Stats(); st.UploadFailures != 0 {
		t.Errorf("%d upload failures counted while offline, want 0", st.UploadFailures)
	}

	// An fsync that asks for the bucket fails at once, and says why.
	if err := c.FlushName(e.ctx, "new.txt"); !errors.Is(err, transfer.ErrOffline) {
		t.Fatalf("FlushName while offline: %v, want ErrOffline", err)
	}

	close(online)
	e.flush(c) // no action but waiting: the uploader resumes by itself
	if got := e.object("new.txt"); !bytes.Equal(got, []byte("made offline")) {
		t.Fatalf("new.txt in the bucket: %q", got)
	}
}
