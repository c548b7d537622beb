package names

import (
	"bytes"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"
)

// writer applies ops to names.db within one transaction, keeping the
// count of names per group (for eviction) and in all.
type writer struct {
	names, groups, meta *bolt.Bucket
	total               int
	touched             map[string]int // group -> change of its names
	session             uint64         // written into the records put (disk.session)
}

func newWriter(tx *bolt.Tx) *writer {
	w := &writer{names: tx.Bucket(namesKey), groups: tx.Bucket(groupsKey), meta: tx.Bucket(metaKey), touched: map[string]int{}}
	if v := w.meta.Get(countKey); v != nil {
		n, _ := binary.Uvarint(v)
		w.total = int(n)
	}
	return w
}

// recKey is the key of a record of kind in group g.
func recKey(g string, kind byte, rest string) []byte {
	return append(append([]byte(g), 0, kind), rest...)
}

// opKey is the key of the record a point op changes.
func opKey(o op) []byte {
	g, _ := o.group()
	switch o.kind {
	case opEntry:
		return recKey(g, 'e', o.key[len(g):])
	case opListing:
		return recKey(g, 'l', "")
	default:
		return recKey(g, 'p', o.key[len(g):])
	}
}

// count is how many names a stored value holds.
func count(v []byte) int {
	if v == nil {
		return 0
	}
	n, _ := binary.Uvarint(v)
	return int(n)
}

func (w *writer) put(g string, k, v []byte) error {
	d := count(v) - count(w.names.Get(k))
	w.touched[g] += d
	w.total += d
	return w.names.Put(k, v)
}

func (w *writer) del(k []byte) error {
	old := w.names.Get(k)
	if old == nil {
		return nil
	}
	g := string(k[:bytes.IndexByte(k, 0)])
	w.touched[g] -= count(old)
	w.total -= count(old)
	return w.names.Delete(k)
}

// delWhere deletes the records whose keys start with pfx and pass keep
// (nil: all).
func (w *writer) delWhere(pfx []byte, match func(k []byte) bool) error {
	var keys [][]byte
	c := w.names.Cursor()
	for k, _ := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, _ = c.Next() {
		if match == nil || match(k) {
			keys = append(keys, bytes.Clone(k))
		}
	}
	for _, k := range keys {
		if err := w.del(k); err != nil {
			return err
		}
	}
	return nil
}

// applyAll applies the ops of batch in order, but for the puts of a
// listing that a later op of the batch replaces: a drain of many files
// into one directory queues its listing once per file, and encoding each
// would cost O(n) per file again. The record ends the same, and the
// group is still marked used.
func (w *writer) applyAll(batch []op) error {
	later := map[string]bool{} // listings replaced later in the batch
	skip := make([]bool, len(batch))
	for i := len(batch) - 1; i >= 0; i-- {
		if o := batch[i]; o.kind == opListing {
			skip[i] = later[o.key] && o.isPut()
			later[o.key] = true
		}
	}
	for i, o := range batch {
		if skip[i] {
			w.touched[o.key] += 0
			continue
		}
		if err := w.apply(o); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) apply(o op) error {
	switch o.kind {
	case opEntry, opListing, opPlaceholder:
		g, _ := o.group()
		if !o.isPut() {
			return w.del(opKey(o))
		}
		v, err := encode(o, w.session)
		if err != nil {
			return err
		}
		return w.put(g, opKey(o), v)
	case opTouch:
		w.touched[o.key] += 0
		return nil
	}
	// On a prefix: the groups under it, and the placeholder of the
	// prefix itself, held by the group above.
	isPlaceholder := func(k []byte) bool {
		i := bytes.IndexByte(k, 0)
		return i+1 < len(k) && k[i+1] == 'p'
	}
	match := isPlaceholder
	if o.kind == opDropUnder {
		match = nil
	}
	if err := w.delWhere([]byte(o.key), match); err != nil {
		return err
	}
	pg := placeholderGroup(o.key)
	if pg == o.key {
		return nil // the root: done above
	}
	return w.delWhere(recKey(pg, 'p', o.key[len(pg):]), nil)
}

// dropGroup deletes every record of group g.
func (w *writer) dropGroup(g string) error {
	return w.delWhere(recKey(g, 0, "")[:len(g)+1], nil)
}

// finish writes the count of names and the groups' use.
func (w *writer) finish() int {
	now := uint64(time.Now().Unix())
	for g, d := range w.touched {
		_, n := decodeGroupMeta(w.groups.Get([]byte(g)))
		n += d
		if n <= 0 {
			w.groups.Delete([]byte(g))
			continue
		}
		w.groups.Put([]byte(g), binary.AppendUvarint(binary.BigEndian.AppendUint64(nil, now), uint64(n)))
	}
	if w.total < 0 {
		w.total = 0
	}
	w.meta.Put(countKey, binary.AppendUvarint(nil, uint64(w.total)))
	return w.total
}

// decodeGroupMeta returns when a group was last used and its names.
func decodeGroupMeta(v []byte) (uint64, int) {
	if len(v) < 8 {
		return 0, 0
	}
	n, _ := binary.Uvarint(v[8:])
	return binary.BigEndian.Uint64(v[:8]), int(n)
}
