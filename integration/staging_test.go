package integration

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/bucketfs/bucketfs/internal/testutil"
	"github.com/bucketfs/bucketfs/transfer"
	bolt "go.etcd.io/bbolt"
)

// A clean unmount leaves no staged parts, in the bucket or as records in
// the cache index, even those of an upload cut short by a crash whose
// background cleanup failed and waits for its retry (a minute): the
// unmount cleans them up after the flush.
func TestCleanUnmountLeavesNoStagedParts(t *testing.T) {
	emu := startEmulator(t, nil)
	cacheDir := t.TempDir()
	args := []string{"--parallel-upload-threshold", "8MiB", "--part-size", "5MiB", "--write-back-delay", "0"}
	composing := make(chan struct{}, 1)
	emu.SetHook(func(r *http.Request) (int, bool) {
		if strings.HasSuffix(r.URL.Path, "/compose") {
			select {
			case composing <- struct{}{}:
			default:
			}
			<-r.Context().Done() // hangs until the process dies
			return http.StatusServiceUnavailable, true
		}
		return 0, false
	})
	m := mount(t, emu, mountOpts{cacheDir: cacheDir, args: args})
	data := testutil.RandomBytes(23<<20, 7)
	if err := os.WriteFile(m.path("big.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-composing: // every part is staged
	case <-time.After(2 * time.Minute):
		t.Fatalf("the parts were never composed; staged: %v", listObjects(t, emu, transfer.StagingPrefix))
	}
	m.crash(t)
	if len(listObjects(t, emu, transfer.StagingPrefix)) == 0 {
		t.Fatal("the crash left no staged parts: nothing to clean up")
	}

	// Deleting staged parts is refused for a while: the restart's
	// background cleanup fails, and so does that of its own upload.
	emu.SetHook(func(r *http.Request) (int, bool) {
		return http.StatusForbidden, r.Method == http.MethodDelete && strings.Contains(r.URL.Path, transfer.StagingPrefix)
	})
	m2 := mount(t, emu, mountOpts{cacheDir: cacheDir, dir: m.dir, args: args})
	m2.logs.waitFor(t, "cleaning up the parts of an interrupted upload failed", time.Minute)
	// The restart's own upload of big.bin leaves nothing to delete: its
	// composes delete their sources themselves.
	emu.SetHook(nil)
	m2.unmount(t)

	if got := object(t, emu, "big.bin"); !bytes.Equal(got, data) {
		t.Errorf("the bucket has %d bytes of big.bin, want the %d written", len(got), len(data))
	}
	if left := listObjects(t, emu, transfer.StagingPrefix); len(left) != 0 {
		t.Errorf("staged parts left in the bucket after a clean unmount: %v", left)
	}
	if recs := stagingRecordsIn(t, cacheDir); len(recs) != 0 {
		t.Errorf("staging records left in the cache index after a clean unmount: %v", recs)
	}
}

// stagingRecordsIn lists the staging prefixes the index in cacheDir
// records (no mount may use it).
func stagingRecordsIn(t *testing.T, cacheDir string) []string {
	t.Helper()
	db, err := bolt.Open(filepath.Join(cacheDir, "index.db"), 0o600, &bolt.Options{ReadOnly: true, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []string
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("staging"))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, _ []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A large file's upload leaves nothing staged to delete: each compose
// deletes its sources itself (deleteSourceObjects), so no staged part is
// kept by soft delete (and billed) after a later deletion.
func TestLargeUploadDeletesNothingAfter(t *testing.T) {
	emu := startEmulator(t, nil)
	var deletes atomic.Int64
	emu.SetHook(func(r *http.Request) (int, bool) {
		if r.Method == http.MethodDelete && strings.Contains(r.URL.Path, transfer.StagingPrefix) {
			deletes.Add(1)
		}
		return 0, false
	})
	m := mount(t, emu, mountOpts{args: []string{"--parallel-upload-threshold", "8MiB", "--part-size", "5MiB", "--write-back-delay", "0"}})
	data := testutil.RandomBytes(23<<20, 8)
	if err := os.WriteFile(m.path("big.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	m.unmount(t)
	if got := object(t, emu, "big.bin"); !bytes.Equal(got, data) {
		t.Errorf("the bucket has %d bytes of big.bin, want the %d written", len(got), len(data))
	}
	if left := listObjects(t, emu, transfer.StagingPrefix); len(left) != 0 {
		t.Errorf("staged parts left in the bucket: %v", left)
	}
	if n := deletes.Load(); n != 0 {
		t.Errorf("%d deletions of staged parts sent, want none", n)
	}
}

// A bucket whose default event-based hold would keep every staged part
// is said so once at start, and a large file goes up as one resumable
// upload, nothing staged.
func TestHeldBucketUploadsWithoutStaging(t *testing.T) {
	emu := startEmulator(t, nil)
	ctx := testutil.Ctx(t, 30*time.Second)
	client, err := storage.NewClient(ctx, emu.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.Bucket(testBucket).Update(ctx, storage.BucketAttrsToUpdate{DefaultEventBasedHold: true}); err != nil {
		t.Fatalf("setting the bucket's default event-based hold: %v", err)
	}
	var staged, composes atomic.Int64
	emu.SetHook(func(r *http.Request) (int, bool) {
		if strings.Contains(r.URL.Query().Get("name"), transfer.StagingPrefix) {
			staged.Add(1)
		}
		if strings.HasSuffix(r.URL.Path, "/compose") {
			composes.Add(1)
		}
		return 0, false
	})
	m := mount(t, emu, mountOpts{args: []string{"--parallel-upload-threshold", "8MiB", "--part-size", "5MiB", "--write-back-delay", "0"}})
	data := testutil.RandomBytes(23<<20, 9)
	if err := os.WriteFile(m.path("big.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	m.unmount(t)
	if got := object(t, emu, "big.bin"); !bytes.Equal(got, data) {
		t.Errorf("the bucket has %d bytes of big.bin, want the %d written", len(got), len(data))
	}
	if n := strings.Count(m.logs.String(), "keeps objects from being deleted"); n != 1 {
		t.Errorf("the bucket's hold was said %d times, want once", n)
	}
	if staged.Load() != 0 || composes.Load() != 0 {
		t.Errorf("%d staged parts and %d composes sent, want none", staged.Load(), composes.Load())
	}
}
