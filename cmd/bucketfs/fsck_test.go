package main

import (
	"errors"
	"testing"
)

func TestParseFsckArgs(t *testing.T) {
	c, err := parseFsckArgs([]string{"--cache-dir", "/c", "--rebuild"})
	if err != nil || c.dir != "/c" || !c.rebuild {
		t.Errorf("parse: %+v, %v", c, err)
	}
	for _, args := range [][]string{{}, {"--rebuild"}, {"--cache-dir", "/c", "extra"}, {"--bogus"}} {
		var ue *usageError
		if _, err := parseFsckArgs(args); !errors.As(err, &ue) {
			t.Errorf("parse %q: %v, want a usage error", args, err)
		}
	}
}
