package emulator

import (
	"fmt"
	"iter"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// TestSeededScale measures the seeded store at BUCKETFS_EMU_SCALE objects
// (for example 1000000) in ten directories: the time to seed them, to list
// one directory (with a delimiter; names only, then the fields bucketfs
// asks for) and the whole bucket (names only) through the official client
// in pages of 1000, to stat 1000 of them, and the heap they take.
// It is a measurement, not a check, and runs only when asked:
//
//	BUCKETFS_EMU_SCALE=1000000 go test -run TestSeededScale -v ./internal/emulator/
func TestSeededScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BUCKETFS_EMU_SCALE"))
	if n <= 0 {
		t.Skip("set BUCKETFS_EMU_SCALE=N to measure the seeded store with N objects")
	}
	ctx := testutil.Ctx(t, 30*time.Minute)
	s := start(t, nil)
	c := newClient(t, s, false)
	const dirs = 10
	objs := iter.Seq[Seed](func(yield func(Seed) bool) {
		for i := range n {
			if !yield(Seed{Name: fmt.Sprintf("d%d/f%08d", i%dirs, i), Data: []byte(strconv.Itoa(i))}) {
				return
			}
		}
	})
	before := heapInUse()
	t0 := time.Now()
	if got, err := s.PutMany(testBucket, objs); err != nil || got != n {
		t.Fatalf("PutMany = %d, %v", got, err)
	}
	seeded := time.Since(t0)
	heap := heapInUse() - before
	t.Logf("seeded %d objects in %v (%.0f/s); heap %.0f MiB (%.0f B/object)",
		n, seeded, float64(n)/seeded.Seconds(), float64(heap)/(1<<20), float64(heap)/float64(n))

	q := &storage.Query{Prefix: "d3/", Delimiter: "/"}
	_ = q.SetAttrSelection([]string{"Name"})
	t0 = time.Now()
	names, _ := listAll(ctx, t, c, q, 0)
	t.Logf("listed one directory, %d names, in %v", len(names), time.Since(t0))
	if len(names) != n/dirs {
		t.Fatalf("listed %d names, want %d", len(names), n/dirs)
	}

	// The fields transfer.GCS.List asks for.
	q = &storage.Query{Prefix: "d3/", Delimiter: "/"}
	_ = q.SetAttrSelection([]string{"Name", "Size", "Generation", "Metageneration", "Updated", "ContentType", "ContentEncoding", "Metadata", "CRC32C", "MD5"})
	t0 = time.Now()
	names, _ = listAll(ctx, t, c, q, 0)
	t.Logf("listed one directory with bucketfs's fields, %d names, in %v", len(names), time.Since(t0))

	q = &storage.Query{}
	_ = q.SetAttrSelection([]string{"Name"})
	t0 = time.Now()
	names, _ = listAll(ctx, t, c, q, 0)
	t.Logf("listed the bucket, %d names, in %v", len(names), time.Since(t0))
	if len(names) != n {
		t.Fatalf("listed %d names, want %d", len(names), n)
	}
	t0 = time.Now()
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("d%d/f%08d", (i*7919)%n%dirs, (i*7919)%n)
		if _, err := c.Bucket(testBucket).Object(name).Attrs(ctx); err != nil {
			t.Fatalf("Attrs %s: %v", name, err)
		}
	}
	t.Logf("1000 stats in %v", time.Since(t0))
	runtime.KeepAlive(s)
}

// heapInUse returns the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
