package cache

// A copy made by a directory rename is dropped from the index once the
// bucket has it, when none of it is cached (uploadDone): there is nothing
// to keep, and a rename of many files would otherwise fill the index.
// But the file system may have looked the name up while the copy was
// still a local change, based on no version (generation 0), and rename
// another file over it just after the drop: with no entry to say
// otherwise, the new record would be based on that stale answer, the
// bucket would refuse its upload (the copy is there), and the renamed
// file would be saved beside the name as a conflict, the name showing
// the content it replaced. madeCopies remembers, for a short while,
// the generation each dropped copy was given, so that takeTargetLocked
// bases the replacement on it, and an entry made again for the name from
// such a lookup (acquire: an exchange, an open) reads that version
// (holds.MadeCopies keeps them, under Cache.mu).
//
// Much the same holds for any version this cache uploaded whose clean
// copy leaves the index (dropLocked): evicted at once when the upload
// settles in a full cache, say. A save by rename (write tmp, rename it
// over the name) looked the name up in the local overlay while the
// previous save's upload ran, based on what that upload replaced;
// renamed over the name just after the upload settled and the copy was
// evicted, it was based on that stale answer and saved beside the name
// as a conflict. ownGone remembers those generations the same way, for
// a rename's base only (takeTargetLocked): a replacement is based on the
// newest version this cache knows the bucket has, whatever its content.
// An open (acquire) does not use them: unlike a copy's, the uploaded
// version's content need not be the one the caller looked up (a lookup
// answered before the upload's last write, or by the bucket), and the
// caller's version gone answers ErrStale, so that it looks again.
