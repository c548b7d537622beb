package names

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
	bolt "go.etcd.io/bbolt"
)

// codecListing is a listing of d/ with every kind of child the stored
// form has a flag for, changed over its base (a layer with a log), with
// a hidden file.
func codecListing() *Listing {
	at := time.Date(2026, 11, 28, 10, 0, 0, 123456789, time.UTC)
	children := map[string]Entry{
		"plain": {Kind: File, Attrs: transfer.ObjectAttrs{Name: "d/plain", Size: 2, Generation: 7, Metageneration: 1, Updated: at, CRC32C: 0xdeadbeef, MD5: []byte{1, 2, 3}}},
		"sub":   {Kind: Dir},
		"other": {Kind: File, Attrs: transfer.ObjectAttrs{Name: "elsewhere/x", Size: -1, Generation: 1 << 60}},
		"meta": {Kind: File, Attrs: transfer.ObjectAttrs{Name: "d/meta", ContentType: "text/plain", ContentEncoding: "gzip",
			Metadata: map[string]string{"a": "1", "b": ""}, Updated: time.Date(1000, 1, 1, 0, 0, 0, 5, time.UTC)}},
		"zone":  {Kind: File, Attrs: transfer.ObjectAttrs{Name: "d/zone", Updated: at.In(time.FixedZone("x", 3600)), MD5: []byte{}}},
		"empty": {Kind: File, Attrs: transfer.ObjectAttrs{Name: "d/empty", Metadata: map[string]string{}}},
		"ü/é":   {Kind: Dir},
	}
	l := newListing(children, at, at.Add(time.Minute), map[string]Entry{"sub": {Kind: File, Attrs: transfer.ObjectAttrs{Name: "d/sub", Size: 9}}})
	for i := range 40 { // past compactAfter: a new base, then a log again
		l = l.with(fmt.Sprintf("n%02d", i), Entry{Kind: File, Attrs: transfer.ObjectAttrs{Name: fmt.Sprintf("d/n%02d", i), Size: int64(i)}})
	}
	l = l.with("plain", Entry{Kind: None})
	l = l.with("a-first", Entry{Kind: Dir})
	return l
}

// entriesOf returns l's children.
func entriesOf(l *Listing) map[string]Entry {
	out := map[string]Entry{}
	l.each(func(seg string, e Entry) { out[seg] = e })
	return out
}

// A listing read back from its stored form has the same children (kinds
// and every attribute, times to the nanosecond and in their zones), the
// same count of directories, hidden files and time asked; the children
// come in order of their names.
func TestListingCodecRoundTrip(t *testing.T) {
	l := codecListing()
	v, err := encodeListing(nil, l, "d/", 42)
	if err != nil {
		t.Fatal(err)
	}
	got, session, err := decodeListing(v)
	if err != nil {
		t.Fatal(err)
	}
	if session != 42 || !got.fetched.Equal(l.fetched) || got.Len() != l.Len() || got.Dirs() != l.Dirs() {
		t.Errorf("read back: session %d, fetched %v, %d children, %d dirs; want 42, %v, %d, %d", session, got.fetched, got.Len(), got.Dirs(), l.fetched, l.Len(), l.Dirs())
	}
	want, have := entriesOf(l), entriesOf(got)
	for seg, e := range want {
		h := have[seg]
		if !reflect.DeepEqual(h, e) && !(h.Kind == e.Kind && h.Attrs.Updated.Equal(e.Attrs.Updated) && sameButUpdated(h.Attrs, e.Attrs)) {
			t.Errorf("%s: read back %+v, want %+v", seg, h, e)
		}
	}
	if len(have) != len(want) {
		t.Errorf("read back %d children, want %d", len(have), len(want))
	}
	if !maps.EqualFunc(got.hidden, l.hidden, func(a, b Entry) bool { return reflect.DeepEqual(a, b) }) {
		t.Errorf("hidden read back %+v, want %+v", got.hidden, l.hidden)
	}
	names := got.Names()
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Fatalf("names not sorted: %q", names)
		}
	}
	if _, off := have["zone"].Attrs.Updated.Zone(); off != 3600 {
		t.Errorf("a time in another zone read back at offset %d s, want 3600", off)
	}
}

// sameButUpdated compares attributes but for Updated (compared by Equal).
func sameButUpdated(a, b transfer.ObjectAttrs) bool {
	a.Updated, b.Updated = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

// A stored listing cut short or damaged anywhere is an error, never a
// panic or a listing with made-up children.
func TestListingCodecDamage(t *testing.T) {
	v, err := encodeListing(nil, codecListing(), "d/", 1)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(v) {
		if _, _, err := decodeListing(v[:n]); err == nil {
			t.Fatalf("a record cut at %d of %d bytes was read", n, len(v))
		}
	}
	if _, _, err := decodeListing(append(v[:len(v):len(v)], 0)); err == nil {
		t.Error("a record with a byte after it was read")
	}
	bad := append([]byte(nil), v...)
	bad[len(bad)-3] = 0xff // inside the last child
	_, _, _ = decodeListing(bad)
}

// The JSON form of a listing, which names.db held before the stored form
// was binary, is still read: a cache kept across the upgrade keeps its
// listings.
func TestListingJSONFormStillRead(t *testing.T) {
	dir := t.TempDir()
	e := newEnvWith(t, diskOptions(t, dir, nil))
	e.put("d/f", "one")
	e.list("d/")
	e.m.Close()
	// Rewrite the stored listing of d/ in the JSON form, with another
	// generation than the bucket's, to tell it from a fresh listing.
	db, err := bolt.Open(filepath.Join(dir, DBName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := recKey("d/", 'l', "")
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(namesKey)
		v := b.Get(key)
		_, k := binary.Uvarint(v)
		l, session, err := decodeListing(v[k:])
		if err != nil {
			return fmt.Errorf("the listing stored now: %w", err)
		}
		rec := listingRec{Fetched: l.fetched.UnixNano(), S: session,
			Children: map[string]entryRec{"f": toRec(Entry{Kind: File, Attrs: transfer.ObjectAttrs{Name: "d/f", Size: 3, Generation: 5}}, time.Time{})}}
		js, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return b.Put(key, append(binary.AppendUvarint(nil, 2), js...))
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	e.reopen(diskOptions(t, dir, nil))
	l, n := e.list("d/")
	if c := l.Child("f"); c.Kind != File || c.Attrs.Generation != 5 || n != 0 {
		t.Errorf("d/f from the JSON form: %+v, %d requests; want generation 5 and none", c, n)
	}
}
