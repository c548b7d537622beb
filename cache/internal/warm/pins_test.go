package warm

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// fakePins holds pinned names, each charged its length in bytes, and
// logs the calls made to it.
type fakePins struct {
	pinned []string
	used   int64
	calls  []string
}

func (p *fakePins) Pinned(under func(string) bool) (pins []string, bytes, used int64) {
	p.calls = append(p.calls, "Pinned")
	for _, name := range p.pinned {
		if under(name) {
			pins = append(pins, name)
			bytes += int64(len(name))
		}
	}
	return pins, bytes, p.used
}

func (p *fakePins) Unpin(name string) { p.calls = append(p.calls, "Unpin "+name) }

// Unpin takes the pins under its prefixes at once, then ends each.
func TestUnpinCollectsThenEnds(t *testing.T) {
	p := &fakePins{pinned: []string{"a/x", "ab", "a/y/z", "b"}}
	n, b := Unpin[string](p, []string{"a", "b"})
	if want := []string{"Pinned", "Unpin a/x", "Unpin a/y/z", "Unpin b"}; !slices.Equal(p.calls, want) {
		t.Errorf("calls %q, want %q", p.calls, want)
	}
	if n != 3 || b != 3+5+1 {
		t.Errorf("Unpin = %d, %d; want 3, 9", n, b)
	}
}

// The warning comes only when the cache is over its cap with pins.
func TestWarnOverCap(t *testing.T) {
	for _, tc := range []struct {
		pinned []string
		used   int64
		warned bool
	}{
		{[]string{"a"}, 11, true},
		{[]string{"a"}, 10, false}, // at the cap
		{nil, 11, false},           // over, but nothing pinned keeps it so
	} {
		var out bytes.Buffer
		WarnOverCap[string](&fakePins{pinned: tc.pinned, used: tc.used}, 10, slog.New(slog.NewTextHandler(&out, nil)))
		if got := strings.Contains(out.String(), "pinned_files=1"); got != tc.warned || (out.Len() > 0) != tc.warned {
			t.Errorf("%d pinned, %d used of 10: warned %q", len(tc.pinned), tc.used, out.String())
		}
	}
}
