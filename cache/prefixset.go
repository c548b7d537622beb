package cache

import "strings"

// prefixSet counts holds on prefixes (each ends in '/'): the prefixes of
// directory renames (Cache.quiet, Cache.frozen). Guarded by Cache.mu.
type prefixSet map[string]int

func (s prefixSet) add(prefixes ...string) {
	for _, p := range prefixes {
		s[p]++
	}
}

func (s prefixSet) remove(prefixes ...string) {
	for _, p := range prefixes {
		if s[p]--; s[p] <= 0 {
			delete(s, p)
		}
	}
}

// covers reports whether name is under one of the prefixes.
func (s prefixSet) covers(name string) bool {
	for p := range s {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// overlaps reports whether one of the prefixes is over or under p.
func (s prefixSet) overlaps(p string) bool {
	for q := range s {
		if overlaps(p, q) {
			return true
		}
	}
	return false
}

// overlaps reports whether one of prefixes a and b holds the other.
func overlaps(a, b string) bool { return strings.HasPrefix(a, b) || strings.HasPrefix(b, a) }
