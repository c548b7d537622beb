package testhook

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	got := parse("a.b=1s, c.d=20ms,bad,e=x")
	if len(got) != 2 || got["a.b"] != time.Second || got["c.d"] != 20*time.Millisecond {
		t.Errorf("parse = %v", got)
	}
}
