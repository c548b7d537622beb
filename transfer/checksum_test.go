package transfer

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/crc32c"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// TestDownloadChecksWholeObject: a download given the object's CRC32C
// completes when the bytes match; with a checksum that does not match,
// an object of several chunks ends broken (nothing present, reads fail
// with ErrChecksum) and one of a single chunk is fetched twice and then
// fails, before any reader sees its bytes.
func TestDownloadChecksWholeObject(t *testing.T) {
	for _, tt := range []struct {
		name  string
		size  int
		wrong bool
		reads int64 // media reads expected
	}{
		{"several chunks, right sum", 5*testChunk + 10, false, 6},
		{"several chunks, wrong sum", 5*testChunk + 10, true, 6},
		{"one chunk, right sum", 100, false, 1},
		{"one chunk, wrong sum", 100, true, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			emu := startEmulator(t)
			g := newTestGCS(t, emu)
			data := testutil.Pattern(tt.size, 31)
			gen := put(t, emu, "obj", data)
			ctx := testutil.Ctx(t, 60*time.Second)
			sum := crc32c.Checksum(data)
			if tt.wrong {
				sum ^= 1
			}
			dst := newMemFile(tt.size, 0)
			d := NewDownload(g, "obj", gen, int64(tt.size), dst, nil, DownloadOptions{ChunkSize: testChunk, Parallelism: 2, CRC32C: sum, CheckCRC: true})
			defer d.Stop()
			d.Start()
			waitClosed(t, ctx, d.Idle(), "the background walk to end")
			err := d.Ensure(ctx, 0, int64(tt.size))
			if got := emu.MediaReads(bucketName, "obj"); got != tt.reads {
				t.Errorf("MediaReads = %d, want %d", got, tt.reads)
			}
			present, summed, sums := d.Snapshot()
			if !tt.wrong {
				if err != nil || d.Err() != nil {
					t.Fatalf("Ensure = %v, Err = %v with the right checksum", err, d.Err())
				}
				var whole uint32
				for i := range present {
					if !present[i] || !summed[i] {
						t.Fatalf("chunk %d: present %v, summed %v after completion", i, present[i], summed[i])
					}
					off := int64(i) * testChunk
					n := min(int64(testChunk), int64(tt.size)-off)
					if want := crc32c.Checksum(data[off : off+n]); sums[i] != want {
						t.Errorf("chunk %d sum %08x, want %08x", i, sums[i], want)
					}
					whole = crc32c.Combine(whole, sums[i], n)
				}
				if whole != sum {
					t.Errorf("combined sums %08x, want the object's %08x", whole, sum)
				}
				return
			}
			if !errors.Is(err, ErrChecksum) || !errors.Is(d.Err(), ErrChecksum) {
				t.Fatalf("Ensure = %v, Err = %v with a wrong checksum; want ErrChecksum", err, d.Err())
			}
			for i, p := range present {
				if p {
					t.Errorf("chunk %d counts as present after the object failed its check", i)
				}
			}
			select {
			case <-d.Complete():
				t.Error("Complete is closed for an object that failed its check")
			default:
			}
		})
	}
}

// TestPutRefusesWrongChecksum: an upload carrying a CRC32C its body does
// not have is refused by the store, fails with ErrChecksum and leaves no
// object; with the right one it lands.
func TestPutRefusesWrongChecksum(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	ctx := testutil.Ctx(t, 60*time.Second)
	data := testutil.Pattern(10000, 32)
	_, err := g.Put(ctx, "bad", bytes.NewReader(data), PutOptions{CRC32C: crc32c.Checksum(data) ^ 4, SendCRC32C: true})
	if err == nil {
		t.Fatal("an upload with a wrong checksum succeeded")
	}
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("an upload refused for its checksum: %v, want ErrChecksum (the cache sends the file again)", err)
	}
	if _, err := g.Stat(ctx, "bad"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("after a refused upload Stat = %v, want ErrNotExist", err)
	}
	a, err := g.Put(ctx, "good", bytes.NewReader(data), PutOptions{CRC32C: crc32c.Checksum(data), SendCRC32C: true})
	if err != nil {
		t.Fatalf("upload with the right checksum: %v", err)
	}
	if a.CRC32C != crc32c.Checksum(data) {
		t.Errorf("the store says CRC32C %08x, want %08x", a.CRC32C, crc32c.Checksum(data))
	}
}

// TestParallelComposeChecksParts: the compose path sends each part with
// its checksum, and the whole is checked against the caller's.
func TestParallelComposeChecksParts(t *testing.T) {
	emu := startEmulator(t)
	g := newTestGCS(t, emu)
	ctx := testutil.Ctx(t, 60*time.Second)
	data := testutil.Pattern(3*MinPartSize+123, 33)
	p := NewParallel(g, ParallelOptions{PartSize: MinPartSize, Parallelism: 4})
	p.maxComposedPart = MinPartSize
	sum := crc32c.Checksum(data)
	staging := NewStaging()
	a, err := p.Put(ctx, "big", bytes.NewReader(data), int64(len(data)), PutOptions{IfGenerationMatch: 0, CRC32C: sum, SendCRC32C: true}, staging)
	if err != nil {
		t.Fatalf("parallel put: %v", err)
	}
	if a.CRC32C != sum {
		t.Errorf("composed CRC32C %08x, want %08x", a.CRC32C, sum)
	}
	if err := p.Clean(ctx, staging); err != nil {
		t.Fatal(err)
	}
	// A reader whose bytes are not those summed: the part that differs is
	// refused, so nothing goes into place.
	staging = NewStaging()
	bad := bytes.Clone(data)
	_, err = p.Put(ctx, "big2", &flipAfter{r: bytes.NewReader(bad), at: int64(2*MinPartSize + 5)}, int64(len(bad)), PutOptions{IfGenerationMatch: 0, CRC32C: sum, SendCRC32C: true}, staging)
	if err == nil {
		t.Fatal("a parallel put whose bytes changed while it read them succeeded")
	}
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("a parallel put whose bytes changed while it read them: %v, want ErrChecksum", err)
	}
	if _, err := g.Stat(ctx, "big2"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("after a refused parallel put Stat = %v, want ErrNotExist", err)
	}
	p.Clean(ctx, staging)
}

// flipAfter reads r, but from the second read that covers byte at on, that
// byte reads flipped: a file changed between the checksum and the upload.
type flipAfter struct {
	r     io.ReaderAt
	at    int64
	reads int
}

func (f *flipAfter) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.r.ReadAt(p, off)
	if f.at >= off && f.at < off+int64(n) {
		f.reads++
		if f.reads > 1 {
			p[f.at-off] ^= 0xff
		}
	}
	return n, err
}
