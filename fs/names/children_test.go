package names

import (
	"reflect"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// TestChildSetKeepsEntries: every child read back from the compact set
// is the Entry put in, whatever it holds (times in UTC or not, zero or
// not, metadata nil or empty, an object name that is not the prefix and
// the name), and the names come sorted.
func TestChildSetKeepsEntries(t *testing.T) {
	utc := time.Date(2026, 11, 27, 22, 1, 2, 345678901, time.UTC)
	local := time.Now() // a monotonic reading, and the local zone
	children := map[string]Entry{
		"b.txt": {Kind: File, Attrs: transfer.ObjectAttrs{Name: "d/b.txt", Size: 7, Generation: 3, Metageneration: 2,
			Updated: utc, CRC32C: 99, MD5: []byte("0123456789abcdef")}},
		"a": {Kind: File, Stale: true, Attrs: transfer.ObjectAttrs{Name: "d/a", Generation: 1, Updated: local,
			ContentType: "text/plain", ContentEncoding: "gzip", Metadata: map[string]string{"bucketfs-mode": "644"}}},
		"sub":   {Kind: Dir},
		"empty": {Kind: File, Attrs: transfer.ObjectAttrs{Name: "d/empty", Generation: 5, Metadata: map[string]string{}}},
		"odd":   {Kind: File, Attrs: transfer.ObjectAttrs{Name: "elsewhere/odd", Generation: 9}},
		"old":   {Kind: File, Attrs: transfer.ObjectAttrs{Name: "d/old", Generation: 4, Updated: time.Date(1, 2, 3, 4, 5, 6, 7, time.UTC)}},
	}
	want := map[string]Entry{}
	for k, v := range children {
		want[k] = v
	}
	s := newChildSet(children)
	if s.len() != len(want) {
		t.Fatalf("%d children, want %d", s.len(), len(want))
	}
	for seg, w := range want {
		got, ok := s.get(seg)
		if !ok || !reflect.DeepEqual(got, w) {
			t.Errorf("%s: got %+v (%v), want %+v", seg, got, ok, w)
		}
		if !got.Attrs.Updated.Equal(w.Attrs.Updated) {
			t.Errorf("%s: Updated %v, want %v", seg, got.Attrs.Updated, w.Attrs.Updated)
		}
	}
	if _, ok := s.get("missing"); ok {
		t.Error("a name not in the set was found")
	}
	if got := s.names(); !reflect.DeepEqual(got, []string{"a", "b.txt", "empty", "odd", "old", "sub"}) {
		t.Errorf("names %v, not sorted", got)
	}
}
