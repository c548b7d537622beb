// Package testemu starts the in-process GCS emulator for tests and fills
// it. Only tests import it (not internal/emulator's own, which it would
// make an import cycle).
package testemu

import (
	"testing"

	"github.com/bucketfs/bucketfs/internal/emulator"
)

// Start runs an emulator with options o; it stops with the test.
func Start(t testing.TB, o emulator.Options) *emulator.Server {
	t.Helper()
	emu, err := emulator.Start(o)
	if err != nil {
		t.Fatalf("starting emulator: %v", err)
	}
	t.Cleanup(emu.Close)
	return emu
}

// Put stores data as object name of bucket and returns its generation,
// failing the test on error.
func Put(t testing.TB, emu *emulator.Server, bucket, name string, data []byte) int64 {
	t.Helper()
	gen, err := emu.Put(bucket, name, data)
	if err != nil {
		t.Fatalf("emulator put %s: %v", name, err)
	}
	return gen
}
