package names

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// BenchmarkConfirmManyInOneDirectory confirms 20,000 new files in one
// directory whose listing is cached (a drain of many small files): the
// cost of keeping the listing up to date must not grow with its size.
func BenchmarkConfirmManyInOneDirectory(b *testing.B) {
	const files = 20_000
	names := make([]string, files)
	for i := range names {
		names[i] = fmt.Sprintf("d/f%06d", i)
	}
	warn := func(string, string, ...any) {}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		m := New(&listOnlyBucket{}, noLocal{}, time.Hour)
		if _, err := m.List(context.Background(), "d/", warn); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for j, n := range names {
			m.Confirmed(n, transfer.ObjectAttrs{Name: n, Size: 4096, Generation: int64(j + 1)}, false)
		}
		b.StopTimer()
		if l, _ := m.List(context.Background(), "d/", warn); len(l.Names()) != files {
			b.Fatalf("d/ lists %d names, want %d", len(l.Names()), files)
		}
		m.Close()
	}
}

// BenchmarkConfirmManyInOneDirectoryNamesDB is the same drain with
// names.db, until it is written (Close): the writer must not encode the
// whole listing once per confirmation either.
func BenchmarkConfirmManyInOneDirectoryNamesDB(b *testing.B) {
	const files = 20_000
	warn := func(string, string, ...any) {}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		m := Open(&listOnlyBucket{}, noLocal{}, Options{TTL: time.Hour, Dir: b.TempDir(), Bucket: "bench"})
		if _, err := m.List(context.Background(), "d/", warn); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for j := range files {
			n := fmt.Sprintf("d/f%06d", j)
			m.Confirmed(n, transfer.ObjectAttrs{Name: n, Size: 4096, Generation: int64(j + 1)}, false)
		}
		m.Close()
	}
}
