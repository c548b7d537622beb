package holds

import (
	"iter"
	"maps"
	"strings"
	"time"
)

// Counts counts the holds on names. The zero value is empty and ready.
type Counts struct{ n map[string]int }

// Add adds one hold on name.
func (c *Counts) Add(name string) {
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
}

// Release ends one hold on name and reports whether it was the last.
func (c *Counts) Release(name string) (last bool) {
	if c.n[name]--; c.n[name] <= 0 {
		delete(c.n, name)
		return true
	}
	return false
}

// Held is how many holds name has.
func (c *Counts) Held(name string) int { return c.n[name] }

// AnyUnder reports whether a name under prefix (or prefix itself) is
// held.
func (c *Counts) AnyUnder(prefix string) bool {
	for name := range c.n {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// Map is a copy of the counts, by name.
func (c *Counts) Map() map[string]int { return maps.Clone(c.n) }

// Prefixes counts holds on prefixes (each ends in '/'). The zero value is
// empty and ready.
type Prefixes struct{ n map[string]int }

// Add adds one hold on each of prefixes.
func (s *Prefixes) Add(prefixes ...string) {
	if s.n == nil {
		s.n = map[string]int{}
	}
	for _, p := range prefixes {
		s.n[p]++
	}
}

// Remove ends one hold on each of prefixes.
func (s *Prefixes) Remove(prefixes ...string) {
	for _, p := range prefixes {
		if s.n[p]--; s.n[p] <= 0 {
			delete(s.n, p)
		}
	}
}

// Covers reports whether name is under one of the prefixes.
func (s *Prefixes) Covers(name string) bool {
	for p := range s.n {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Overlaps reports whether one of the prefixes is over or under p.
func (s *Prefixes) Overlaps(p string) bool {
	for q := range s.n {
		if Overlap(p, q) {
			return true
		}
	}
	return false
}

// All yields each prefix held and how many times.
func (s *Prefixes) All() iter.Seq2[string, int] { return maps.All(s.n) }

// Overlap reports whether one of prefixes a and b holds the other.
func Overlap(a, b string) bool { return strings.HasPrefix(a, b) || strings.HasPrefix(b, a) }

// MadeCopyKeep is how long a dropped copy's generation is remembered: far
// longer than a lookup and the rename that follows it take.
const MadeCopyKeep = 10 * time.Second

// MadeCopiesMax bounds the remembered copies; past it, those older than
// MadeCopyKeep go, then any until half are left.
const MadeCopiesMax = 4096

type madeCopy struct {
	gen int64
	at  time.Time
}

// MadeCopies remembers the generations of versions made in the bucket
// (copies, uploads) whose entries were dropped from the index. The zero
// value is empty and ready.
type MadeCopies struct{ m map[string]madeCopy }

// Remember records that the copy at name, generation gen, left the index
// at now.
func (c *MadeCopies) Remember(name string, gen int64, now time.Time) {
	if c.m == nil {
		c.m = map[string]madeCopy{}
	}
	if len(c.m) >= MadeCopiesMax {
		cut := now.Add(-MadeCopyKeep)
		for n, m := range c.m {
			if m.at.Before(cut) {
				delete(c.m, n)
			}
		}
		for n := range c.m {
			if len(c.m) < MadeCopiesMax/2 {
				break
			}
			delete(c.m, n)
		}
	}
	c.m[name] = madeCopy{gen: gen, at: now}
}

// Get returns the generation of the copy at name that left the index in
// the MadeCopyKeep before now, or 0.
func (c *MadeCopies) Get(name string, now time.Time) int64 {
	m, ok := c.m[name]
	if !ok {
		return 0
	}
	if now.Sub(m.at) > MadeCopyKeep {
		delete(c.m, name)
		return 0
	}
	return m.gen
}

// Forget forgets the copy at name (its object is gone: no version to
// base a replacement on).
func (c *MadeCopies) Forget(name string) { delete(c.m, name) }
