package folders

import (
	"testing"

	"github.com/bucketfs/bucketfs/transfer"
)

// After a folder rename, an object under the new name is the old one
// moved only if its content is the same; names that did not exist
// before, or changed on the way, are not.
func TestMatched(t *testing.T) {
	before := []transfer.ObjectAttrs{
		{Name: "a/x", Generation: 1, Size: 3, CRC32C: 7},
		{Name: "a/sub/y", Generation: 2, Size: 4, CRC32C: 8},
		{Name: "a/z", Generation: 3, Size: 5, CRC32C: 9},
	}
	after := []transfer.ObjectAttrs{
		{Name: "b/x", Generation: 11, Size: 3, CRC32C: 7},
		{Name: "b/sub/y", Generation: 12, Size: 4, CRC32C: 8},
		{Name: "b/z", Generation: 13, Size: 5, CRC32C: 10}, // written again meanwhile
		{Name: "b/new", Generation: 14, Size: 1, CRC32C: 1},
	}
	got := Matched("a/", "b/", before, after)
	if len(got) != 2 {
		t.Fatalf("matched %v, want b/x and b/sub/y", got)
	}
	if m := got["b/sub/y"]; m.Old.Name != "a/sub/y" || m.New.Generation != 12 {
		t.Errorf("b/sub/y: %+v", m)
	}
	if _, ok := got["b/z"]; ok {
		t.Errorf("an object whose content changed counts as moved")
	}
}
