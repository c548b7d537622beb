package recovery

import (
	"fmt"
	"os"
	"sort"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
)

// fsckSums checks every cached copy of recs in dataDir against its sums,
// for Fsck: the size of a clean copy, and each chunk that has a sum.
func fsckSums(dataDir string, recs map[string]durable.Record, rep *Report) {
	var buf []byte
	for name, r := range recs {
		if why := r.HeldWhy(); why != "" {
			rep.Held = append(rep.Held, name+": "+why)
			continue
		}
		if r.Deleted || len(r.Sums) == 0 || r.ChunkSize <= 0 {
			continue
		}
		f, err := os.Open(durable.DataPath(dataDir, r.ID))
		if err != nil {
			continue // reported as a record without a file
		}
		rep.CheckedCopies++
		clean := !r.LocalContent()
		if buf == nil {
			buf = make([]byte, 1<<20)
		}
		why := checkFileSums(f, buf, r, clean)
		f.Close()
		switch {
		case why == "":
		case clean:
			rep.BadCopies = append(rep.BadCopies, name+": "+why)
		default:
			rep.Held = append(rep.Held, name+": "+why)
		}
	}
	sort.Strings(rep.BadCopies)
	sort.Strings(rep.Held)
}

// checkFileSums returns why f, the copy of record r, fails its sums, or
// "" if it does not.
func checkFileSums(f *os.File, buf []byte, r durable.Record, clean bool) string {
	st, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	size := r.Size
	if clean && st.Size() != r.Size {
		return fmt.Sprintf("the file has %d bytes, its record says %d", st.Size(), r.Size)
	}
	if !clean {
		size = st.Size() // the file is the truth about its length
	}
	for i := range len(r.Sums) / 4 {
		want, ok := r.ChunkSum(i)
		if !ok {
			continue
		}
		off, n := durable.ChunkSpan(i, r.ChunkSize, size)
		if n <= 0 || (n < r.ChunkSize && i < len(r.Sums)/4-1) {
			return fmt.Sprintf("chunk %d is cut short: the file ends at %d", i, size)
		}
		got, err := durable.ReadChunkSum(f, buf, off, n)
		if err != nil {
			return err.Error()
		}
		if got != want {
			return fmt.Sprintf("chunk %d (%d bytes at %d) has CRC32C %08x, its record says %08x", i, n, off, got, want)
		}
	}
	return ""
}

// ShorterOrLonger says how a data file of got bytes differs from the want
// its record says, for messages that give both numbers.
func ShorterOrLonger(got, want int64) string {
	switch {
	case got < want:
		return "shorter"
	case got > want:
		return "longer"
	}
	return "the right size"
}
