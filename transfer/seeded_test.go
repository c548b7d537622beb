package transfer

import (
	"testing"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil/testemu"
)

// TestGCSSeededConformance runs the Bucket conformance suite against an
// emulator whose bucket is served by its seeded store (the ordered index
// behind Server.PutMany, which benches use for millions of objects):
// objects the suite puts live there, and its listings, stats and reads
// are answered from there, its writes over them through the fake.
func TestGCSSeededConformance(t *testing.T) {
	testBucket(t, func(t *testing.T) (Bucket, *emulator.Server) {
		emu := testemu.Start(t, emulator.Options{Buckets: []string{bucketName}, Seeded: true})
		return newTestGCS(t, emu), emu
	})
}
