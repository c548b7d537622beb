package warm

import "log/slog"

// Pins is what ending pins (Unpin) and the warning of pins over the cap
// (WarnOverCap) need of the cache. Package cache implements it; E is its
// entry, which crosses opaquely. Its methods are called with no lock of
// this package held.
type Pins[E any] interface {
	// Pinned returns, in one critical section, the pinned copies whose
	// names under reports true, the sum of their charges, and the bytes
	// all the cache's copies are charged now. It changes nothing.
	Pinned(under func(name string) bool) (pins []E, bytes, used int64)
	// Unpin ends e's pin and records it, unless the pin has ended or e
	// has left the cache meanwhile. The copy stays cached, evictable.
	Unpin(e E)
}

// Unpin ends the pins of the copies under prefixes (see UnderAny) and
// returns how many there were and their bytes: the pins at one instant,
// then each ended (Pins.Unpin).
func Unpin[E any](p Pins[E], prefixes []string) (int, int64) {
	pins, bytes, _ := p.Pinned(func(name string) bool { return UnderAny(name, prefixes) })
	for _, e := range pins {
		p.Unpin(e)
	}
	return len(pins), bytes
}

// WarnOverCap says so, on log, when the cache is over its cap max after
// a start's eviction because of pinned copies (pinned under a larger
// --cache-max-size): nothing new is cached until they are unpinned, and
// writes wait for room that never comes (ENOSPC after the cache's
// FullWait).
func WarnOverCap[E any](p Pins[E], max int64, log *slog.Logger) {
	pins, bytes, used := p.Pinned(func(string) bool { return true })
	if used > max && len(pins) > 0 {
		log.Warn("pinned copies keep the cache over its size: nothing more is cached and writes fail with ENOSPC until 'bucketfs unpin' (or a larger --cache-max-size)",
			"pinned_files", len(pins), "pinned_bytes", bytes, "used_bytes", used, "cache_max_size", max)
	}
}
