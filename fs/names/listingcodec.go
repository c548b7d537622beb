package names

// The stored form of a listing in names.db: binary, written and read one
// child at a time. A listing of 100,000 names was a JSON object of 20 MB
// built through a map of records (and read back through two maps): some
// 100 MB of garbage at once, every time it was written or loaded, which
// set the heap's high mark of an ls -l of such a directory (issue 38). In
// this form it is about 3 MB for such a listing, written into one buffer
// of about the size it needs, and read straight into the listing's
// sorted records (children.go), with no map between.
//
// The value after the count of names (disk.go) is:
//
//	0x01 (listingBinary; a JSON record starts with '{')
//	varint fetched (unix nanoseconds), uvarint session
//	string prefix (the object names' prefix, childSet)
//	uvarint n, then n children sorted by name
//	uvarint h, then h hidden children sorted by name
//
// and a child is: string seg, byte kind, and for a File: byte flags,
// varint size, generation, metageneration, uvarint CRC32C, then what
// the flags say it has (cf*). Strings are a uvarint length and the
// bytes. Records in the JSON form (before 2026-11-28) are still read.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"
)

const listingBinary = 0x01

// Flags of a child's attributes.
const (
	cfName     = 1 << iota // an object name that is not prefix+seg
	cfType                 // content type
	cfEncoding             // content encoding
	cfMeta                 // custom metadata
	cfMD5                  // MD5
	cfUpdated              // update time, unix nanoseconds (UTC)
	cfTime                 // update time that unix nanoseconds cannot hold (time.MarshalBinary)
)

// encodeListing appends to dst the stored form of l, the listing of
// directory prefix (after the count of names), written by session.
func encodeListing(dst []byte, l *Listing, prefix string, session uint64) ([]byte, error) {
	dst = append(dst, listingBinary)
	dst = binary.AppendVarint(dst, l.fetched.UnixNano())
	dst = binary.AppendUvarint(dst, session)
	dst = appendString(dst, prefix)
	dst = binary.AppendUvarint(dst, uint64(l.n))
	var err error
	count := 0
	l.eachSorted(func(seg string, e Entry) {
		count++
		if err == nil {
			dst, err = appendChild(dst, prefix, seg, e)
		}
	})
	if err == nil && count != l.n {
		err = fmt.Errorf("listing of %d children holds %d", l.n, count)
	}
	if err != nil {
		return nil, err
	}
	hidden := make([]string, 0, len(l.hidden))
	for seg := range l.hidden {
		hidden = append(hidden, seg)
	}
	sort.Strings(hidden)
	dst = binary.AppendUvarint(dst, uint64(len(hidden)))
	for _, seg := range hidden {
		if dst, err = appendChild(dst, prefix, seg, l.hidden[seg]); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// listingSize estimates the stored size of l, to size the buffer once.
func listingSize(l *Listing, prefix string) int { return 64 + len(prefix) + l.n*40 }

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// appendChild appends child seg, e.
func appendChild(dst []byte, prefix, seg string, e Entry) ([]byte, error) {
	dst = appendString(dst, seg)
	dst = append(dst, byte(e.Kind))
	if e.Kind != File {
		return dst, nil // directories and negative entries carry no attributes (as in the JSON form)
	}
	a := e.Attrs
	var flags byte
	if a.Name != prefix+seg {
		flags |= cfName
	}
	if a.ContentType != "" {
		flags |= cfType
	}
	if a.ContentEncoding != "" {
		flags |= cfEncoding
	}
	if a.Metadata != nil {
		flags |= cfMeta
	}
	if a.MD5 != nil {
		flags |= cfMD5
	}
	switch {
	case a.Updated.IsZero():
	case a.Updated.Equal(time.Unix(0, a.Updated.UnixNano())) && a.Updated.Location() == time.UTC:
		flags |= cfUpdated
	default:
		flags |= cfTime
	}
	dst = append(dst, flags)
	dst = binary.AppendVarint(dst, a.Size)
	dst = binary.AppendVarint(dst, a.Generation)
	dst = binary.AppendVarint(dst, a.Metageneration)
	dst = binary.AppendUvarint(dst, uint64(a.CRC32C))
	if flags&cfName != 0 {
		dst = appendString(dst, a.Name)
	}
	if flags&cfType != 0 {
		dst = appendString(dst, a.ContentType)
	}
	if flags&cfEncoding != 0 {
		dst = appendString(dst, a.ContentEncoding)
	}
	if flags&cfMeta != 0 {
		keys := make([]string, 0, len(a.Metadata))
		for k := range a.Metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		dst = binary.AppendUvarint(dst, uint64(len(keys)))
		for _, k := range keys {
			dst = appendString(appendString(dst, k), a.Metadata[k])
		}
	}
	if flags&cfMD5 != 0 {
		dst = appendString(dst, string(a.MD5))
	}
	if flags&cfUpdated != 0 {
		dst = binary.AppendVarint(dst, a.Updated.UnixNano())
	}
	if flags&cfTime != 0 {
		b, err := a.Updated.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("the update time of %s: %w", seg, err)
		}
		dst = appendString(dst, string(b))
	}
	return dst, nil
}

// decodeListing reads a listing in the stored form (after the count of
// names), and the session that wrote it. Its expiry is left zero for the
// caller to set.
func decodeListing(v []byte) (*Listing, uint64, error) {
	r := reader{b: v}
	if r.byte() != listingBinary {
		return nil, 0, errors.New("not a listing in the binary form")
	}
	fetched := time.Unix(0, r.varint())
	session := r.uvarint()
	prefix := r.string()
	n := r.count()
	set := &childSet{prefix: prefix, recs: make([]childRec, 0, n)}
	sorted := true
	for i := 0; i < n && r.err == nil; i++ {
		seg, e := r.child(prefix)
		if i > 0 && seg <= set.recs[i-1].seg {
			sorted = false
		}
		set.recs = append(set.recs, childRec{seg: seg})
		set.recs[i].set(prefix, e)
	}
	var hidden map[string]Entry
	if h := r.count(); h > 0 && r.err == nil {
		hidden = make(map[string]Entry, h)
		for i := 0; i < h && r.err == nil; i++ {
			seg, e := r.child(prefix)
			hidden[seg] = e
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes after the listing", len(r.b))
	}
	if r.err != nil {
		return nil, 0, r.err
	}
	if !sorted {
		sort.Slice(set.recs, func(i, j int) bool { return set.recs[i].seg < set.recs[j].seg })
	}
	return newListingOf(set, fetched, time.Time{}, hidden), session, nil
}

// reader reads the stored form; the first error sticks (err), and every
// read after it returns zero values.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("a listing record cut short or damaged (%s)", what)
	}
	r.b = nil
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.fail("byte")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uvarint() uint64 {
	v, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.fail("uvarint")
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *reader) varint() int64 {
	v, k := binary.Varint(r.b)
	if k <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[k:]
	return v
}

// count reads a number of items, each at least one byte long.
func (r *reader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("count")
		return 0
	}
	return int(n)
}

func (r *reader) string() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("string")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// child reads a child (appendChild).
func (r *reader) child(prefix string) (string, Entry) {
	seg := r.string()
	e := Entry{Kind: Kind(r.byte())}
	if e.Kind != File {
		if e.Kind != None && e.Kind != Dir {
			r.fail("kind")
		}
		return seg, e
	}
	flags := r.byte()
	a := &e.Attrs
	a.Size, a.Generation, a.Metageneration = r.varint(), r.varint(), r.varint()
	crc := r.uvarint()
	if crc > 0xffffffff {
		r.fail("crc32c")
	}
	a.CRC32C = uint32(crc)
	a.Name = prefix + seg
	if flags&cfName != 0 {
		a.Name = r.string()
	}
	if flags&cfType != 0 {
		a.ContentType = r.string()
	}
	if flags&cfEncoding != 0 {
		a.ContentEncoding = r.string()
	}
	if flags&cfMeta != 0 {
		n := r.count()
		a.Metadata = make(map[string]string, n)
		for i := 0; i < n && r.err == nil; i++ {
			k := r.string()
			a.Metadata[k] = r.string()
		}
	}
	if flags&cfMD5 != 0 {
		a.MD5 = []byte(r.string())
	}
	if flags&cfUpdated != 0 {
		a.Updated = time.Unix(0, r.varint()).UTC()
	}
	if flags&cfTime != 0 {
		if err := a.Updated.UnmarshalBinary([]byte(r.string())); err != nil && r.err == nil {
			r.fail("time")
		}
	}
	return seg, e
}
