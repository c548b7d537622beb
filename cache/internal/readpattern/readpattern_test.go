package readpattern

import "testing"

const chunk = 8 << 20

// A reader in order builds a run: past a quarter of a chunk it gets the
// chunk ahead, past a whole chunk the object; one that starts at the
// object's start goes whole after a quarter.
func TestRunInOrder(t *testing.T) {
	var r Reads
	off := int64(chunk) // not the start
	var s Seen
	step := int64(128 << 10)
	for off < 2*chunk {
		s = r.Note(off, step, chunk/2)
		got := Decide(s, chunk, 1, 100)
		want := Read
		switch {
		case s.Run >= chunk:
			want = Whole
		case s.Run >= chunk/4:
			want = Readahead
		}
		if got != want {
			t.Fatalf("at run %d: %v, want %v", s.Run, got, want)
		}
		if s.Run > step && !s.Continues(step) {
			t.Fatalf("a read in order at %d does not continue its run", off)
		}
		off += step
	}
	if Decide(s, chunk, 1, 100) != Whole {
		t.Fatalf("a whole chunk read in order is not fetched whole")
	}
	var fromStart Reads
	if got := Decide(fromStart.Note(0, chunk/4, chunk/2), chunk, 1, 100); got != Whole {
		t.Errorf("a quarter chunk read from the start: %v, want Whole", got)
	}
}

// A reader of a footer and an index (far apart) fetches only what it
// reads, and its reads do not count as a run; reads that arrive out of
// order within the slack still do.
func TestScatteredReadsStayReads(t *testing.T) {
	var r Reads
	size := int64(100 * chunk)
	for _, off := range []int64{size - 64<<10, 10 * chunk, 55 * chunk} {
		s := r.Note(off, 64<<10, chunk/2)
		if s.InOrder || s.Continues(64<<10) {
			t.Errorf("read at %d counted in order", off)
		}
		if got := Decide(s, chunk, 3, 100); got != Read {
			t.Errorf("read at %d: %v, want Read", off, got)
		}
	}
	var k Reads
	k.Note(chunk, 1<<20, chunk/2)
	s := k.Note(chunk+2<<20, 1<<20, chunk/2) // the kernel's next read came first
	s = k.Note(chunk+1<<20, 1<<20, chunk/2)
	if !s.InOrder || s.Run != 3<<20 {
		t.Errorf("reads within the slack: in order %v, run %d, want true, %d", s.InOrder, s.Run, 3<<20)
	}
}

// Once a quarter of the object's chunks are present or being fetched,
// any read makes it whole.
func TestCoverageGoesWhole(t *testing.T) {
	var r Reads
	s := r.Note(50*chunk, 4096, chunk/2)
	if got := Decide(s, chunk, 24, 100); got != Read {
		t.Errorf("24 of 100 chunks: %v, want Read", got)
	}
	if got := Decide(s, chunk, 25, 100); got != Whole {
		t.Errorf("25 of 100 chunks: %v, want Whole", got)
	}
}
