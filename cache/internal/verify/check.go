package verify

import (
	"fmt"
	"os"
	"slices"

	"github.com/bucketfs/bucketfs/cache/internal/integrity"
)

// Chunks checks chunks [first, last] of l's copy (read through f,
// integrity.Check) that this process has not checked yet and that have
// sums: the chunks of a clean copy, and those a changed file did not
// write. A clean chunk that fails is dropped from the copy (Ledger.Drop);
// a changed file with one is held (Ledger.Hold). It reports which of the
// chunks asked for may be served from the file; the others must be read
// from the bucket (a clean copy) or answer ErrDamaged (a held file).
func Chunks(l Ledger, f *os.File, first, last int) []bool {
	s := l.Span(first, last)
	good, todo := plan(s)
	if len(todo) == 0 {
		return good
	}
	bad, why := integrity.Check(f, s.ChunkSize, s.Size, todo)
	for _, w := range todo {
		good[w.I-first] = true
	}
	for _, i := range bad {
		good[i-first] = false
	}
	var checked []int
	for _, w := range todo {
		if good[w.I-first] {
			checked = append(checked, w.I)
		}
	}
	if current, trust := l.Settle(s, checked); !current {
		// Written meanwhile: what was read proves nothing about the file
		// now. A changed file is the truth (its upload checks it again);
		// a clean copy's bad chunks are read from the bucket.
		if trust {
			for i := range good {
				good[i] = true
			}
		}
		return good
	}
	switch {
	case len(bad) == 0:
	case s.Clean:
		l.Drop(bad, why)
	case !l.Hold(bad, why):
		for _, i := range bad {
			good[i-first] = true // written meanwhile after all
		}
	}
	return good
}

// plan says which chunks of s may be served as they are (good) and which
// must be checked against their sums first (todo).
func plan(s Span) (good []bool, todo []integrity.Want) {
	good = make([]bool, len(s.Chunks))
	for j, ch := range s.Chunks {
		switch {
		case ch.Checked:
			good[j] = true
		case !ch.HasSum && s.Clean:
			// Present without a sum (a copy from before sums were kept):
			// served as before. Not present (dropped as bad): from the
			// bucket.
			good[j] = ch.Present
		case !ch.HasSum:
			// Written here (the file is the truth), or held already.
			good[j] = !s.Held
		default:
			todo = append(todo, integrity.Want{I: s.First + j, Sum: ch.Sum})
		}
	}
	return good, todo
}

// Read checks chunks [first, last], which a read through a write handle
// touches (Chunks), and returns nil if the read may serve them from f.
// Else a held file answers ErrDamaged, and a clean copy ErrBadCopy (the
// open for writing checked it whole, so the damage came since): its bad
// chunks were dropped, and the file does not hold the bytes.
func Read(l Ledger, f *os.File, first, last int) error {
	if !slices.Contains(Chunks(l, f, first, last), false) {
		return nil
	}
	s := l.State()
	if s.Held != "" {
		return Damaged(s.Name, s.Held)
	}
	return fmt.Errorf("%s: %w", s.Name, ErrBadCopy)
}
