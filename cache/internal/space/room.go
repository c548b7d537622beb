package space

// Waking the writers waiting for room: one channel, closed and replaced
// by wakeLocked. Charge (a lower charge) and Measure (more free space
// than last said) wake them here; the caller wakes them (Wake) at every
// other event that may free room. And what a writer is told when no room
// comes (WhyFull): the budget's limits and the files holding the room.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Wake wakes the writers waiting for room.
func (b *Budget) Wake() {
	b.mu.Lock()
	b.wakeLocked()
	b.mu.Unlock()
}

func (b *Budget) wakeLocked() {
	close(b.room)
	b.room = make(chan struct{})
}

// Watch is for a writer about to wait for room for grow more bytes. At
// one instant, it returns the channel the next wake closes, and whether
// grow fits now (a measure since the writer last tried freed the room:
// it tries again rather than wait) and whether the disk is short of its
// floor for it (room freed by other programs is then seen only by
// measuring: the writer measures again every FreeTTL). So no wake
// between the writer's last try and its wait is lost. If grow does not
// fit, the writer is counted waiting (Waiters) until it calls Unwatch.
func (b *Budget) Watch(grow int64) (wake <-chan struct{}, fits, diskShort bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.overLocked(grow) <= 0 {
		return b.room, true, false
	}
	b.waiters++
	return b.room, false, b.diskShortLocked(grow) > 0
}

// Unwatch ends a wait that Watch counted.
func (b *Budget) Unwatch() {
	b.mu.Lock()
	b.waiters--
	b.mu.Unlock()
}

// Waiters is how many writers wait for room (between Watch and Unwatch).
func (b *Budget) Waiters() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiters
}

// A Holder is a file holding room that cannot be evicted now, as WhyFull
// names it.
type Holder struct {
	Name  string
	Bytes int64  // what it is charged
	Why   string // why it cannot be evicted: "open", "pinned"...
}

// holdersNamed is how many of the holders WhyFull names: the largest.
const holdersNamed = 3

// WhyFull says why grow more bytes find no room: the cap, the disk's
// floor, and the largest of held, the files holding room that cannot be
// evicted (it sorts held).
func (b *Budget) WhyFull(grow int64, held []Holder) string {
	b.mu.Lock()
	var why []string
	if b.used+grow > b.max {
		why = append(why, fmt.Sprintf("%s more do not fit: %s of the cache's %s max size in use",
			SizeText(grow), SizeText(b.used), SizeText(b.max)))
	}
	if b.diskShortLocked(grow) > 0 {
		why = append(why, fmt.Sprintf("%s more would take its disk under the %s free-space floor (%s free)",
			SizeText(grow), SizeText(b.floor), SizeText(max(b.free+b.freeing, 0))))
	}
	b.mu.Unlock()
	if len(why) == 0 {
		why = append(why, fmt.Sprintf("%s more found no room", SizeText(grow)))
	}
	slices.SortFunc(held, func(a, b Holder) int { return cmp.Compare(b.Bytes, a.Bytes) })
	var names []string
	for _, h := range held[:min(len(held), holdersNamed)] {
		names = append(names, fmt.Sprintf("%s %s (%s)", h.Name, SizeText(h.Bytes), h.Why))
	}
	if len(names) > 0 {
		why = append(why, fmt.Sprintf("held by %d files that cannot be evicted, the largest: %s", len(held), strings.Join(names, ", ")))
	}
	return strings.Join(why, "; ")
}

// SizeText writes n bytes for a message: "512 B", "60.7 MiB".
func SizeText(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	if n < 1<<10 {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/(1<<10), 0
	for v >= 1<<10 && u < len(units)-1 {
		v, u = v/(1<<10), u+1
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}
