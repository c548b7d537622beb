package report

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A failure repeated every second for five minutes is logged once, then
// once a minute with its count; the recovery is logged once; a new
// failure after it is logged at once.
func TestRepeatLimitWarnings(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	now := time.Unix(1000, 0)
	r := NewRepeatLimit(time.Minute)
	r.now = func() time.Time { return now }
	errIndex := errors.New("index broken")

	for range 300 {
		r.Failed(log, "apply failed", errIndex)
		now = now.Add(time.Second)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("300 failures a second apart logged %d lines, want 5 (the first, then one a minute):\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "index broken") || strings.Contains(lines[0], "failures_since") {
		t.Errorf("first line: %s", lines[0])
	}
	if !strings.Contains(lines[1], "failures_since_last_warning=60") || !strings.Contains(lines[1], "failing_for=1m0s") {
		t.Errorf("second line: %s", lines[1])
	}

	buf.Reset()
	r.Succeeded(log, "works again")
	r.Succeeded(log, "works again")
	if got := buf.String(); strings.Count(got, "works again") != 1 || !strings.Contains(got, "failures=300") || !strings.Contains(got, "level=INFO") {
		t.Errorf("recovery logged:\n%s", got)
	}

	buf.Reset()
	r.Failed(log, "apply failed", errIndex)
	if got := buf.String(); strings.Count(got, "apply failed") != 1 || strings.Contains(got, "failures_since") {
		t.Errorf("a new failure after the recovery logged:\n%s", got)
	}
}
