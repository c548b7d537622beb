package space

import (
	"strings"
	"testing"
	"time"
)

// measured is a budget of max bytes with a floor, its disk last measured
// now with free bytes free.
func measured(max, floor, free int64) *Budget {
	return &Budget{max: max, floor: floor, free: free, freeAt: time.Now(), room: make(chan struct{})}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A lower charge wakes the waiters; a higher one does not.
func TestChargeWakes(t *testing.T) {
	b, err := New(t.TempDir(), 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	wake, fits, _ := b.Watch(0)
	if !fits {
		t.Fatal("nothing charged: 0 more bytes do not fit")
	}
	b.Charge(0, 60)
	if isClosed(wake) {
		t.Error("a higher charge woke the waiters")
	}
	if b.Used() != 60 {
		t.Errorf("used %d, want 60", b.Used())
	}
	b.Charge(60, 10)
	if !isClosed(wake) {
		t.Error("a lower charge did not wake the waiters")
	}
	if b.Used() != 10 {
		t.Errorf("used %d, want 10", b.Used())
	}
}

// TryReserve takes what fits under the cap and above the floor, and says
// by how much the rest is over.
func TestTryReserve(t *testing.T) {
	b := measured(100, 50, 80)
	b.Charge(0, 90)
	if over := b.TryReserve(20); over != 10 {
		t.Errorf("20 bytes with 90 of 100 used: over by %d, want 10", over)
	}
	b.Charge(90, 0)
	if over := b.TryReserve(40); over != 10 {
		t.Errorf("40 bytes with 80 free above a floor of 50: over by %d, want 10", over)
	}
	if over := b.TryReserve(20); over > 0 {
		t.Errorf("20 bytes with 80 free above a floor of 50: over by %d, want a fit", over)
	}
	if short, ok := b.DiskShort(20); !ok || short != 10 {
		t.Errorf("after reserving 20, 20 more are short by %d (measured %v), want 10", short, ok)
	}
	b.Evicted(10)
	if short, _ := b.DiskShort(20); short != 0 {
		t.Errorf("after evicting 10, 20 more are short by %d, want 0", short)
	}
}

// Without a floor, or before its first measure, the disk is never short.
func TestDiskNotMeasured(t *testing.T) {
	b, err := New(t.TempDir(), 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	b.Refresh()
	if short, ok := b.DiskShort(1 << 62); ok || short != 0 {
		t.Errorf("no floor: short %d, measured %v; want 0, false", short, ok)
	}
	if b.Floor() != 0 || b.MaxFileSize() != 100 {
		t.Errorf("no floor: floor %d, largest file %d; want 0, the cap", b.Floor(), b.MaxFileSize())
	}
	b, err = New(t.TempDir(), 100, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	if short, ok := b.DiskShort(1); ok || short != 0 {
		t.Errorf("before a measure: short %d, measured %v; want 0, false", short, ok)
	}
	b.Refresh()
	if short, ok := b.DiskShort(1); !ok || short <= 0 {
		t.Errorf("a floor past the disk, measured: short %d, measured %v; want short", short, ok)
	}
	if b.MaxFileSize() != 1 {
		t.Errorf("a floor past the disk: largest file %d, want 1", b.MaxFileSize())
	}
}

// A negative minFree asks for 5% of the disk, at most 1 GiB.
func TestAutoFloor(t *testing.T) {
	b, err := New(t.TempDir(), 1<<50, -1)
	if err != nil {
		t.Fatal(err)
	}
	if f := b.Floor(); f <= 0 || f > autoMinFree {
		t.Errorf("automatic floor %d, want in (0, %d]", f, autoMinFree)
	}
	if n := b.MaxFileSize(); n <= 0 || n >= MaxObjectSize {
		t.Errorf("largest file %d with a floor on a test disk, want the disk above it", n)
	}
	big, err := New(t.TempDir(), 1<<50, 0)
	if err != nil {
		t.Fatal(err)
	}
	if big.MaxFileSize() != MaxObjectSize {
		t.Errorf("largest file of a 1 PiB cache %d, want the 5 TiB object limit", big.MaxFileSize())
	}
}

// A measure that finds more free space wakes the waiters, and Watch
// answers with what it found.
func TestMeasureWakes(t *testing.T) {
	b, err := New(t.TempDir(), 1<<50, 1)
	if err != nil {
		t.Fatal(err)
	}
	b.Refresh()
	b.mu.Lock()
	b.free = 0 // as if the disk had been full
	b.mu.Unlock()
	wake, fits, short := b.Watch(1)
	if fits || !short || b.Waiters() != 1 {
		t.Fatalf("a full disk: fits %v, short %v, %d waiters; want no fit, short, one", fits, short, b.Waiters())
	}
	b.Measure(FreeTTL) // fresh: not measured again
	if isClosed(wake) {
		t.Error("a fresh measure was taken again")
	}
	b.Measure(0)
	if !isClosed(wake) {
		t.Error("more free space did not wake the waiters")
	}
	b.Unwatch()
	if _, fits, _ := b.Watch(1); !fits || b.Waiters() != 0 {
		t.Errorf("after the measure: fits %v, %d waiters; want a fit, none", fits, b.Waiters())
	}
}

// Changed bytes are counted only when the budget is near the cap, at most
// every pressureEvery.
func TestPressure(t *testing.T) {
	b := measured(100, 0, 0)
	counts := 0
	changed := func(n int64) func() int64 { return func() int64 { counts++; return n } }
	now := time.Now()
	if on, counted := b.Pressure(now, changed(100)); on || counted || counts != 0 {
		t.Fatalf("empty budget: pressure %v, counted %v (%d)", on, counted, counts)
	}
	b.Charge(0, 95)
	if on, counted := b.Pressure(now, changed(95)); !on || !counted {
		t.Errorf("95 of 100 changed: pressure %v, counted %v; want both", on, counted)
	}
	if on, counted := b.Pressure(now.Add(pressureEvery/2), changed(0)); !on || counted {
		t.Errorf("again at once: pressure %v, counted %v; want the last count, not a new one", on, counted)
	}
	if on, counted := b.Pressure(now.Add(pressureEvery), changed(10)); on || !counted {
		t.Errorf("10 changed later: pressure %v, counted %v; want off, counted", on, counted)
	}
	if counts != 2 {
		t.Errorf("%d counts, want 2", counts)
	}
}

// WhyFull names the cap and the floor that hold a growth back, and the
// largest files holding the room.
func TestWhyFull(t *testing.T) {
	b := measured(1<<20, 1<<20, 1<<20)
	b.Charge(0, 1<<20)
	held := []Holder{{"a", 1 << 10, "open"}, {"b", 3 << 10, "pinned"}, {"c", 2 << 10, "uploading"}, {"d", 4 << 10, "changed"}}
	why := b.WhyFull(512, held)
	for _, want := range []string{"512 B more do not fit: 1.0 MiB of the cache's 1.0 MiB", "under the 1.0 MiB free-space floor (1.0 MiB free)",
		"held by 4 files that cannot be evicted, the largest: d 4.0 KiB (changed), b 3.0 KiB (pinned), c 2.0 KiB (uploading)"} {
		if !strings.Contains(why, want) {
			t.Errorf("why full: %q, want it to say %q", why, want)
		}
	}
	if got := SizeText(63648563); got != "60.7 MiB" {
		t.Errorf("SizeText: %q", got)
	}
}
