package fs

import (
	"testing"
	"time"
)

// The gate's quiet moment: none in flight, and none answered within
// gateSettle; a wait that finds none gives up after its bound.
func TestEntryGateQuiet(t *testing.T) {
	var g entryGate
	if !g.quiet(time.Millisecond) {
		t.Fatal("a gate that never saw a request is not quiet")
	}

	g.enter()
	if g.quiet(10 * time.Millisecond) {
		t.Fatal("quiet with a request in flight")
	}

	// Answered while the clock waits: quiet only once it has settled.
	done := make(chan bool)
	go func() { done <- g.quiet(time.Minute) }()
	left := time.Now() // before leave: the gate's own time is no earlier
	g.leave()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("no quiet moment after the request was answered")
		}
		if waited := time.Since(left); waited < gateSettle {
			t.Fatalf("quiet %v after the answer, before it settled (%v)", waited, gateSettle)
		}
	case <-time.After(time.Minute):
		t.Fatal("quiet did not return")
	}

	// Two in flight: quiet only when both are answered.
	g.enter()
	g.enter()
	g.leave()
	if g.quiet(10 * time.Millisecond) {
		t.Fatal("quiet with one of two requests in flight")
	}
	g.leave()
	if !g.quiet(time.Minute) {
		t.Fatal("no quiet moment after both were answered")
	}
}
