package verify

// Checked is which chunks of a copy this process checked against their
// sums, or fetched: they are trusted for its lifetime, since they were
// checked as they were written. Package cache keeps one per entry
// (entry.checked), under its lock; the zero value has none checked.
type Checked []bool

// Has reports whether chunk i is checked.
func (c Checked) Has(i int) bool { return i < len(c) && c[i] }

// Set marks chunk i of a copy of n chunks as checked (ok) or not.
func (c *Checked) Set(i, n int, ok bool) {
	if len(*c) < n {
		*c = append(*c, make([]bool, n-len(*c))...)
	}
	if i < len(*c) {
		(*c)[i] = ok
	}
}

// AllOf is a Checked of n chunks, every one checked.
func AllOf(n int) Checked {
	c := make(Checked, n)
	for i := range c {
		c[i] = true
	}
	return c
}
