package fs

import (
	"fmt"
	"testing"

	"github.com/bucketfs/bucketfs/transfer"
)

// TestInodeNumbers: a version's number is the same every time it is
// computed (no table: a walk costs nothing, and a forgotten node comes
// back with its number), differs between names, versions and kinds, and
// never meets a fresh number or the root's; a retired number is not
// handed out again until unretired.
func TestInodeNumbers(t *testing.T) {
	f := &FS{retired: map[uint64]struct{}{}}
	seen := map[uint64]string{}
	for i := range 200_000 {
		for _, k := range []struct {
			kind byte
			gen  int64
		}{{'f', 1}, {'f', 2}, {'d', 0}} {
			key := fmt.Sprintf("%c %d d/f%06d", k.kind, k.gen, i)
			ino := hashIno(k.kind, fmt.Sprintf("d/f%06d", i), k.gen)
			if ino < 2 || ino&^hashInoMask != 0 {
				t.Fatalf("%s: number %#x out of the hashed range", key, ino)
			}
			if other, ok := seen[ino]; ok {
				t.Fatalf("%s and %s share number %#x", key, other, ino)
			}
			seen[ino] = key
		}
	}
	a := transfer.ObjectAttrs{Name: "d/f000007", Generation: 1}
	if f.fileIno(a) != hashIno('f', a.Name, 1) || f.fileIno(a) != f.fileIno(a) {
		t.Fatal("a version's number changes between calls")
	}
	if f.dirIno("") != 1 {
		t.Fatal("the root is not 1")
	}
	n1, n2 := f.fileIno(transfer.ObjectAttrs{Name: "new"}), f.fileIno(transfer.ObjectAttrs{Name: "new"})
	if n1 == n2 || n1&freshInoBit == 0 || int64(n1) < 0 {
		t.Fatalf("fresh numbers %#x, %#x: want distinct, with the fresh bit, positive", n1, n2)
	}
	ino := f.fileIno(a)
	f.retire(ino)
	if got := f.fileIno(a); got == ino || got&freshInoBit == 0 {
		t.Fatalf("retired number %#x handed out again (%#x)", ino, got)
	}
	f.unretire(ino)
	if got := f.fileIno(a); got != ino {
		t.Fatalf("after the node was forgotten: %#x, want %#x", got, ino)
	}
}
