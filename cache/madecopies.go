package cache

import "time"

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
// such a lookup (acquire: an exchange, an open) reads that version.

// madeCopyKeep is how long a dropped copy's generation is remembered: far
// longer than a lookup and the rename that follows it take.
const madeCopyKeep = 10 * time.Second

// madeCopiesMax bounds the remembered copies; past it, the oldest half
// (by the time they were made) is forgotten.
const madeCopiesMax = 4096

type madeCopy struct {
	gen int64
	at  time.Time
}

// rememberCopyLocked records that the copy at name, generation gen, left
// the index now.
func (c *Cache) rememberCopyLocked(name string, gen int64) {
	now := time.Now()
	if len(c.madeCopies) >= madeCopiesMax {
		cut := now.Add(-madeCopyKeep)
		for n, m := range c.madeCopies {
			if m.at.Before(cut) {
				delete(c.madeCopies, n)
			}
		}
		for n := range c.madeCopies {
			if len(c.madeCopies) < madeCopiesMax/2 {
				break
			}
			delete(c.madeCopies, n)
		}
	}
	c.madeCopies[name] = madeCopy{gen: gen, at: now}
}

// madeCopyLocked returns the generation of the copy at name that left the
// index in the last madeCopyKeep, or 0.
func (c *Cache) madeCopyLocked(name string) int64 {
	m, ok := c.madeCopies[name]
	if !ok {
		return 0
	}
	if time.Since(m.at) > madeCopyKeep {
		delete(c.madeCopies, name)
		return 0
	}
	return m.gen
}
