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
// the generation each dropped copy was given, so that replaceTargetLocked
// bases the replacement on it, and an entry made again for the name from
// such a lookup (acquire: an exchange, an open) reads that version
// (holds.MadeCopies keeps them, under Cache.mu).
