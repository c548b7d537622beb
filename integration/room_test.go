package integration

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/control"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// Issue 26 on a real mount: the room a removal frees reaches a write
// that waits for it at once. A 28 MiB file is written into a 32 MiB
// cache and kept open; an 8 MiB write then waits for room; the file is
// removed, and closed once the removal has settled. Before the fix the
// deletion kept its 28 MiB counted until the close, and the close woke
// nobody: the write failed with ENOSPC after --cache-full-wait. Now the
// room is free at the removal, and the write goes on within a second.
func TestRemovalFreesRoomForWaitingWrite(t *testing.T) {
	emu := startEmulator(t, nil)
	// Writes through the daemon, which holds each to the cap (writes the
	// kernel makes itself, by default, may pass it: cache/space.go).
	args := []string{"--cache-max-size", "32MiB", "--write-back-delay", "1h", "--cache-full-wait", "10s", "--passthrough-writes=false"}
	m := mount(t, emu, mountOpts{args: args})
	big, err := os.OpenFile(m.path("big"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	if n, err := pwriteAll(int(big.Fd()), testutil.RandomBytes(28*mib, 261), 0); err != nil {
		t.Fatalf("writing big: %v after %d bytes", err, n)
	}
	after := testutil.RandomBytes(8*mib, 262)
	done := make(chan error, 1)
	go func() {
		got, err := writeFileAcked(m.path("after"), after)
		if err == nil && len(got) != len(after) {
			err = os.ErrInvalid
		}
		done <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(m.logs.String(), "writes wait for uploads") {
		select {
		case err := <-done:
			t.Fatalf("the 8 MiB write ended (%v) before it had to wait for room", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the 8 MiB write never waited for room")
		}
		time.Sleep(20 * time.Millisecond) // polling the daemon's log, with a deadline
	}
	if err := os.Remove(m.path("big")); err != nil {
		t.Fatal(err)
	}
	for {
		st := m.status(t)
		if !slices.ContainsFunc(st.Dirty, func(d control.DirtyFile) bool { return d.Name == "big" }) {
			break // the deletion has settled
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deletion of big never settled: %+v", st.Dirty)
		}
		time.Sleep(20 * time.Millisecond) // polling the mount's status, with a deadline
	}
	if err := big.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the 8 MiB write: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("the 8 MiB write still waits for room a second after the removal freed it and the file was closed")
	}
	if st := m.status(t); st.UsedBytes > 8*mib {
		t.Errorf("%d bytes used after the removal, want at most the 8 MiB of after", st.UsedBytes)
	}
	m.unmount(t)
	if got := object(t, emu, "after"); !bytes.Equal(got, after) {
		t.Errorf("bucket's after: %d bytes, want the %d written", len(got), len(after))
	}
	if _, err := emu.Object(testBucket, "big"); err == nil {
		t.Error("big is in the bucket after its removal")
	}
}

// A save by rename (write a temporary file, rename it over the real one:
// what editors and many tools do) counts the file's bytes once. The new
// name shares the bytes with the old one (a hard link in the cache), and
// before the fix the old name's deletion kept them counted too until it
// reached the bucket: after the write-back delay, or at once when the
// doubled count pushed the changes past nine tenths of the cap. Saves of
// a file over a third of the cap then each found the cache full.
func TestSaveByRenameCountsTheBytesOnce(t *testing.T) {
	emu := startEmulator(t, nil)
	args := []string{"--cache-max-size", "32MiB", "--write-back-delay", "1h", "--cache-full-wait", "2s", "--passthrough-writes=false"}
	m := mount(t, emu, mountOpts{args: args})
	var last []byte
	for i := range 3 {
		last = testutil.RandomBytes(12*mib, uint64(270+i))
		if got, err := writeFileAcked(m.path("tmp"), last); err != nil || len(got) != len(last) {
			t.Fatalf("save %d: writing tmp: %v", i, err)
		}
		if err := os.Rename(m.path("tmp"), m.path("final")); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
		if st := m.status(t); st.UsedBytes != 12*mib {
			t.Fatalf("save %d: the cache counts %d bytes, want the file's %d", i, st.UsedBytes, 12*mib)
		}
	}
	m.unmount(t)
	if got := object(t, emu, "final"); !bytes.Equal(got, last) {
		t.Errorf("bucket's final: %d bytes, not the last save", len(got))
	}
	if _, err := emu.Object(testBucket, "tmp"); err == nil {
		t.Error("tmp is in the bucket")
	}
}
