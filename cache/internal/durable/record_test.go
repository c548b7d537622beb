package durable

import (
	"slices"
	"testing"
)

func TestPresentBitmap(t *testing.T) {
	r := Record{ID: 1, Size: 10, ChunkSize: 3} // 4 chunks, the last of 1 byte
	if n := r.Chunks(); n != 4 {
		t.Fatalf("Chunks = %d, want 4", n)
	}
	r.SetPresent([]bool{true, false, true, false})
	if r.Complete || !slices.Equal(r.PresentBools(), []bool{true, false, true, false}) {
		t.Errorf("after SetPresent: complete %v, present %v", r.Complete, r.PresentBools())
	}
	r.SetPresent([]bool{true, true, true, true})
	if !r.Complete || r.Present != nil {
		t.Errorf("all present: complete %v, bitmap %v; want complete and no bitmap", r.Complete, r.Present)
	}
}

func TestChunkSums(t *testing.T) {
	r := Record{ID: 1, Size: 8, ChunkSize: 4}
	r.SetPresent([]bool{true, false})
	r.SetSums([]bool{true, false}, []bool{true, false}, []uint32{7, 0})
	if s, ok := r.ChunkSum(0); !ok || s != 7 {
		t.Errorf("ChunkSum(0) = %d, %v; want 7", s, ok)
	}
	if _, ok := r.ChunkSum(1); ok {
		t.Error("a chunk not present has a sum")
	}
	if !r.MarkWritten(1, 2) || r.MarkWritten(0, 3) {
		t.Error("MarkWritten reports a change only the first time a chunk is written")
	}
	if _, ok := r.ChunkSum(0); ok {
		t.Error("a written chunk still has a sum")
	}
	if !r.ForgetSums() || r.Sums != nil || r.Written != nil {
		t.Errorf("after ForgetSums: %+v", r)
	}
}

// A changed record's description gives back what a rebuild needs; a
// clean one's is its ID alone.
func TestDescriptionRoundTrip(t *testing.T) {
	if d := Describe("a", Record{ID: 3, Generation: 9, Size: 5}); d.V != 1 || d.ID != 3 || d.Name != "" || d.Dirty || d.Generation != 0 {
		t.Errorf("a clean record's description: %+v, want its ID alone", d)
	}
	r := Record{ID: 4, Generation: 9, Size: 5, ChunkSize: 2, Complete: true, Dirty: true, Attempts: []string{"x"}}
	d := Describe("a", r)
	if !d.LocalContent() || d.Name != "a" {
		t.Errorf("a changed record's description: %+v", d)
	}
	got := d.Record(4, 7, 2) // the file has grown since: it is the truth
	if got.ID != 4 || got.Size != 7 || !got.Complete || !got.Dirty || got.Generation != 9 || !slices.Equal(got.Attempts, r.Attempts) {
		t.Errorf("record from the description: %+v", got)
	}
	dd := Describe("a", Record{ID: 5, Generation: 9, Size: 5, Dirty: true, Deleted: true})
	del := dd.Record(5, 0, 2)
	if del.Size != 0 || !del.Complete || !del.Deleted {
		t.Errorf("a deletion from its description: %+v", del)
	}
}
