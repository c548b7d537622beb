package crc32c

import (
	"math/rand/v2"
	"testing"
)

func TestCombineMatchesWholeChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for _, cut := range []int{0, 1, 7, 8, 4095, 4096, 65537, len(data) - 1, len(data)} {
		a, b := data[:cut], data[cut:]
		got := Combine(Checksum(a), Checksum(b), int64(len(b)))
		if want := Checksum(data); got != want {
			t.Errorf("cut %d: Combine = %08x, want %08x", cut, got, want)
		}
	}
}

func TestCombineManyChunks(t *testing.T) {
	data := make([]byte, 3*1000+17)
	for i := range data {
		data[i] = byte(i * 31)
	}
	var sum uint32
	for off := 0; off < len(data); off += 1000 {
		p := data[off:min(off+1000, len(data))]
		sum = Combine(sum, Checksum(p), int64(len(p)))
	}
	if want := Checksum(data); sum != want {
		t.Fatalf("chunked = %08x, want %08x", sum, want)
	}
	if Combine(0, 0, 0) != 0 || Checksum(nil) != 0 {
		t.Fatal("the checksum of nothing is 0")
	}
}
