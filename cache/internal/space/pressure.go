package space

import "time"

const (
	// PressureTenths of the cap: changed files at or above it are sent
	// at once.
	PressureTenths = 9
	// pressureEvery bounds how often Pressure counts changed bytes.
	pressureEvery = 100 * time.Millisecond
)

// Pressure reports whether changed files fill PressureTenths of the cap,
// and whether it counted them now: changed (the caller's walk of its
// changed files' charges, run without the budget's lock) is called only
// when the budget is that full, at most every pressureEvery; between
// two counts the last one holds.
func (b *Budget) Pressure(now time.Time, changed func() int64) (on, counted bool) {
	limit := b.max / 10 * PressureTenths
	b.mu.Lock()
	if b.used < limit {
		b.pressure = false
		b.mu.Unlock()
		return false, false
	}
	if now.Sub(b.pressureAt) < pressureEvery {
		on = b.pressure
		b.mu.Unlock()
		return on, false
	}
	b.pressureAt = now
	b.mu.Unlock()
	on = changed() >= limit
	b.mu.Lock()
	b.pressure = on
	b.mu.Unlock()
	return on, true
}
