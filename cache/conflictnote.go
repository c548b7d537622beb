package cache

import "github.com/bucketfs/bucketfs/transfer"

// ConflictFunc is told about a write conflict of name (conflictcopy.go):
// the bucket holds remote (or, gone, nothing) and the local version was
// saved beside it. It is called twice, with no lock held: with settled
// false once the local version is saved, while the local copy is still
// the name's (so that the file system can mark its nodes of the old
// version before they could show it), and with settled true once that
// copy has left the name and the name shows the bucket's version (so
// that it can drop what the kernel holds of the old one). The second
// call does not come if a change made meanwhile keeps the copy (it goes
// beside too, at its next try).
type ConflictFunc func(name string, remote transfer.ObjectAttrs, gone, settled bool)

// OnConflict sets the function told about write conflicts; set it before
// the first change, nil turns it off.
func (c *Cache) OnConflict(f ConflictFunc) {
	c.mu.Lock()
	c.conflictFn = f
	c.mu.Unlock()
}

// NoteConflict calls the OnConflict function, if any (upload.Ledger). No
// lock may be held.
func (l uploadLedger) NoteConflict(name string, remote transfer.ObjectAttrs, gone, settled bool) {
	c := l.c
	c.mu.Lock()
	f := c.conflictFn
	c.mu.Unlock()
	if f != nil {
		f(name, remote, gone, settled)
	}
}

// HasLocalContent reports whether name's content has changes not yet in
// the bucket (not a change of metadata alone, nor a pending copy): its
// copy is whole on local disk. The file system opens such a file for
// writing at once rather than at its first write (fs/lazywrite.go): it
// costs nothing, and the open writer holds back an upload of the
// changes so far (a truncation the kernel sent before the open) until
// the writes that follow are made.
func (c *Cache) HasLocalContent(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[name]
	return e != nil && !e.Dropped && !e.Rec.Deleted && e.Rec.LocalContent()
}

// HasCopy reports whether the cache holds all the bytes of generation gen
// of name (a complete clean copy, or one with changes made here): a
// writer of it needs nothing from the bucket.
func (c *Cache) HasCopy(name string, gen int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[name]
	if e == nil || e.Dropped || e.Rec.Deleted || e.Rec.Damaged != "" {
		return false
	}
	return e.Rec.LocalContent() || (e.Rec.Generation == gen && (e.Rec.Complete || e.Fill.Complete()))
}
