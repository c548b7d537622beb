// Package renameplan decides the records a rename writes: the record
// the new name gets, what it is based on, and the deletion the old name
// becomes; for a directory renamed by copies, also which names move and
// how.
//
// A file's rename moves its bytes: the new name's record shares the old
// one's cache file (a hard link) and is uploaded under the new name,
// based on what the bucket had there (Base); the old name becomes a
// deletion (Tomb). An object store has no directories: renaming one
// renames every object under its prefix, in the cache's index at once,
// in one journal entry, and the bucket follows (package cache's
// rename.go has the story). For each name under the prefix:
//
//   - A name whose content has local changes keeps its bytes, as a
//     file's rename does.
//   - Any other name (cached or not) becomes a pending copy at the new
//     name, a record whose content is "generation G of object OLD"
//     (CopyFrom, CopyGen): its upload is a server-side copy. A complete
//     copy's cached bytes are that version's, and come along.
//   - A name that comes back where it came from, unchanged, has nothing
//     to copy.
//   - Every old name becomes a deletion, based on the generation it had
//     (DirTomb), and what changed in it while the journal entry was
//     written is kept (Deletion).
//   - The old directory's placeholder always goes (there may be none in
//     the bucket); the new directory gets one of its own if there is none
//     to copy, so that it exists whatever happens to its files.
//
// Invariants: every old name under the prefix has exactly one Move; a
// new record is Dirty unless it is back where it came from; a deletion is
// Deleted, Dirty and Complete, with no metadata, no copy source and no
// chunks present.
//
// These are functions of plain values (records, the bucket's attributes)
// with no state and no lock: package cache says what the cache has under
// the names, under its own lock, and makes the records it is given.
package renameplan

import (
	"maps"
	"slices"

	"github.com/bucketfs/bucketfs/cache/internal/durable"
	"github.com/bucketfs/bucketfs/cache/internal/objmeta"
	"github.com/bucketfs/bucketfs/transfer"
)

// Move is the plan for one object of a directory rename.
type Move struct {
	Old, New string
	// Remote is the old name in the bucket: Generation 0 if it is not
	// there, -1 for the old directory's placeholder when the bucket
	// did not list one.
	Remote transfer.ObjectAttrs
	// Linked: the new record shares the bytes of the old entry's cache
	// file (Links).
	Linked bool
	NewID  uint64 // the new name's record (0: none, the old name is a deletion already)
	TombID uint64 // the old name's deletion, if it had no entry
}

// Moves returns the move of every object under from to the same name
// under to, by old name: those the bucket lists (remote), those the cache
// has an entry for (local, old names), and the old directory's
// placeholder, which always goes.
func Moves(from, to string, remote []transfer.ObjectAttrs, local []string) map[string]*Move {
	moves := make(map[string]*Move, len(remote)+len(local)+1)
	for _, a := range remote {
		moves[a.Name] = &Move{Old: a.Name, New: to + a.Name[len(from):], Remote: a}
	}
	for _, name := range local {
		if moves[name] == nil {
			moves[name] = &Move{Old: name, New: to + name[len(from):]}
		}
	}
	if moves[from] == nil {
		moves[from] = &Move{Old: from, New: to, Remote: transfer.ObjectAttrs{Name: from, Generation: -1}}
	}
	return moves
}

// Links reports whether a name whose entry has record rec moves with its
// cache file: its content is local, or a complete copy.
func Links(rec *durable.Record) bool {
	return rec != nil && !rec.Deleted && (rec.LocalContent() || rec.Complete)
}

// NeedsNew reports whether move m's new name gets a record: not when the
// old name's entry (rec, nil if none) is a deletion already, but for the
// directory itself, whose new placeholder is always made.
func NeedsNew(from string, m *Move, rec *durable.Record) bool {
	return rec == nil || !rec.Deleted || m.Old == from
}

// Tomb is the deletion a rename leaves at the old name of rec: the
// record with no content of its own (the bytes went with the new name),
// no metadata (a file made again under the name starts without it) and
// no copy source.
func Tomb(rec durable.Record) durable.Record {
	rec.Deleted, rec.Dirty, rec.MetaOnly, rec.Complete, rec.Present = true, true, false, true, nil
	rec.Meta, rec.CopyFrom, rec.CopyGen, rec.CopyType = nil, "", 0, ""
	return rec
}

// DirTomb returns the deletion move m's old name becomes, based on the
// version it deletes, and whether the journal entry writes it: an old
// name whose entry (rec, nil if none) is a deletion already stays as it
// is. chunk is the cache's chunk size.
func DirTomb(m *Move, rec *durable.Record, chunk int64) (durable.Record, bool) {
	if rec != nil && rec.Deleted {
		return *rec, false
	}
	var tomb durable.Record
	if rec != nil {
		tomb = *rec
		if !tomb.Dirty && m.Remote.Generation > tomb.Generation {
			tomb.Generation = m.Remote.Generation
		}
	} else {
		tomb = durable.Record{ID: m.TombID, Generation: m.Remote.Generation, ChunkSize: chunk}
	}
	return Tomb(tomb), true
}

// Base returns the generation a rename's new record is based on: listed,
// what the caller knows the bucket has under the new name (0: nothing),
// or the generation of the entry the new record replaces (replaced, nil
// if none) when that is changed here or newer.
func Base(listed int64, replaced *durable.Record) int64 {
	if replaced != nil && (replaced.Dirty || replaced.Generation > listed) {
		return max(listed, replaced.Generation)
	}
	return listed
}

// NewRecord is the record of move m's new name (ID m.NewID), based on
// generation base, for a rename of directory from: local content moves
// with its cache file (its size the file's, localSize, which reports
// false if it cannot tell), anything else becomes a pending copy. rec is
// the old name's entry's record, nil if it has none; chunk is the
// cache's chunk size.
func NewRecord(from string, m *Move, rec *durable.Record, base, chunk int64, localSize func() (int64, bool)) durable.Record {
	nrec := durable.Record{ID: m.NewID, Generation: base, ChunkSize: chunk, Dirty: true}
	switch {
	case m.Old == from && (rec == nil || rec.Deleted) && m.Remote.Generation <= 0:
		// No placeholder to copy: the new directory gets one of its
		// own, so that it exists whatever happens to its files.
		nrec.Complete = true
	case rec != nil && rec.LocalContent():
		nrec.Size, nrec.Complete, nrec.Meta = rec.Size, true, rec.Meta
		if size, ok := localSize(); ok {
			nrec.Size = size // writes through passthrough handles count when they close
		}
	default:
		src, meta := copySource(m, rec)
		nrec.Size, nrec.Meta = src.Size, meta
		nrec.CopyFrom, nrec.CopyGen, nrec.CopyType = src.Name, src.Generation, src.ContentType
		if m.Linked && rec.Complete && (rec.PendingCopy() || rec.Generation == src.Generation) {
			nrec.Complete = true // the cached bytes are that version's
		}
		if src.Name == m.New && src.Generation == base {
			// Back where it came from, unchanged: nothing to copy.
			nrec.Dirty, nrec.CopyFrom, nrec.CopyGen, nrec.CopyType = false, "", 0, ""
		}
	}
	return nrec
}

// copySource is the version move m's new name is a copy of, and the
// custom metadata the copy keeps: the bucket's version of the old name,
// or the one the old entry (rec, nil if none) has if that is newer, or
// the source of the old entry's own pending copy. The file keeps its
// modification time.
func copySource(m *Move, rec *durable.Record) (transfer.ObjectAttrs, map[string]string) {
	src := m.Remote
	meta := objmeta.Own(src.Metadata)
	if rec != nil {
		switch {
		case rec.PendingCopy():
			src = transfer.ObjectAttrs{Name: rec.CopyFrom, Generation: rec.CopyGen, Size: rec.Size, ContentType: rec.CopyType}
			meta = rec.Meta
		case rec.Generation >= src.Generation:
			src = transfer.ObjectAttrs{Name: m.Old, Generation: rec.Generation, Size: rec.Size, Updated: src.Updated, Metadata: src.Metadata, ContentType: src.ContentType}
			if rec.Meta != nil {
				meta = rec.Meta
			}
		}
	}
	if src.Name == "" {
		src.Name = m.Old
	}
	if _, ok := meta[objmeta.MtimeKey]; !ok && !src.Updated.IsZero() {
		meta = maps.Clone(meta)
		if meta == nil {
			meta = map[string]string{}
		}
		meta[objmeta.MtimeKey] = objmeta.FormatMtime(src.Updated)
	}
	return src, meta
}

// Deletion is what an old entry becomes once the journal entry that
// wrote its deletion tomb is in: tomb, with what changed in the entry
// meanwhile (cur, its record now): an upload that ended moved its
// generation, one that was sent added an upload ID.
func Deletion(tomb, cur durable.Record) durable.Record {
	gen := cur.Generation
	if !cur.Dirty && tomb.Generation > gen {
		gen = tomb.Generation
	}
	attempts := tomb.Attempts
	for _, a := range cur.Attempts {
		if !slices.Contains(attempts, a) {
			attempts = append(slices.Clone(attempts), a) // an upload sent meanwhile
		}
	}
	d := tomb
	d.Generation, d.Attempts = gen, attempts
	return d
}
