package integrity

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bucketfs/bucketfs/internal/crc32c"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

const chunk = 1000

// pattern returns n bytes that differ from chunk to chunk.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

// chunkSums returns the CRC-32C of each chunk of b.
func chunkSums(b []byte) []uint32 {
	var out []uint32
	for off := 0; off < len(b); off += chunk {
		out = append(out, crc32c.Checksum(b[off:min(off+chunk, len(b))]))
	}
	return out
}

// dataFile writes b to a file of its own and opens it; damage, if set,
// changes the file first.
func dataFile(t *testing.T, b []byte, damage func(path string) error) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "1")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if damage != nil {
		if err := damage(path); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func wantAll(sums []uint32) []Want {
	w := make([]Want, len(sums))
	for i, s := range sums {
		w[i] = Want{I: i, Sum: s}
	}
	return w
}

// TestCheckSoundFile: a file whose chunks have their sums fails nothing,
// the short last chunk included.
func TestCheckSoundFile(t *testing.T) {
	data := pattern(3*chunk+500, 1)
	f := dataFile(t, data, nil)
	if bad, why := Check(f, chunk, int64(len(data)), wantAll(chunkSums(data))); bad != nil || why != nil {
		t.Fatalf("Check of a sound file = %v, %v", bad, why)
	}
	if bad, why := Check(f, chunk, int64(len(data)), nil); bad != nil || why != nil {
		t.Fatalf("Check of no chunks = %v, %v", bad, why)
	}
}

// TestCheckFindsDamagedChunk: a byte flipped behind the cache's back
// fails its chunk, and only that one, with the sums in the reason.
func TestCheckFindsDamagedChunk(t *testing.T) {
	data := pattern(4*chunk, 2)
	sums := chunkSums(data)
	f := dataFile(t, data, testutil.FlipByte(2*chunk+17))
	bad, why := Check(f, chunk, int64(len(data)), wantAll(sums))
	if !slices.Equal(bad, []int{2}) {
		t.Fatalf("bad chunks %v, want [2]", bad)
	}
	if why == nil || !strings.HasPrefix(why.Error(), "chunk 2 (1000 bytes at 2000) has CRC32C ") || !strings.Contains(why.Error(), "its record says") {
		t.Errorf("why = %v", why)
	}
	// Only the chunks asked for are read.
	if bad, why := Check(f, chunk, int64(len(data)), []Want{{I: 1, Sum: sums[1]}, {I: 3, Sum: sums[3]}}); bad != nil || why != nil {
		t.Errorf("Check of sound chunks of a damaged file = %v, %v", bad, why)
	}
}

// TestCheckFindsFileCutShort: chunks the file no longer holds fail, and
// the reason says where the file ends.
func TestCheckFindsFileCutShort(t *testing.T) {
	data := pattern(4*chunk, 3)
	f := dataFile(t, data, func(path string) error { return os.Truncate(path, 2*chunk+10) })
	bad, why := Check(f, chunk, int64(len(data)), wantAll(chunkSums(data)))
	if !slices.Equal(bad, []int{2, 3}) {
		t.Fatalf("bad chunks %v, want [2 3]", bad)
	}
	if why == nil || !strings.Contains(why.Error(), "ends at") {
		t.Errorf("why = %v, want where the file ends", why)
	}
}

func TestTouched(t *testing.T) {
	for _, tt := range []struct {
		off, n      int64
		first, last int
	}{
		{0, 1, 0, 0},
		{0, chunk, 0, 0},
		{0, chunk + 1, 0, 1},
		{chunk - 1, 2, 0, 1},
		{chunk, chunk, 1, 1},
		{2*chunk + 5, 3 * chunk, 2, 5},
	} {
		if first, last := Touched(tt.off, tt.n, chunk); first != tt.first || last != tt.last {
			t.Errorf("Touched(%d, %d) = %d, %d; want %d, %d", tt.off, tt.n, first, last, tt.first, tt.last)
		}
	}
}
