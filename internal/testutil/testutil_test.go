package testutil

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"
)

// TestDataIsStable pins the bytes of Pattern and RandomBytes: tests of
// several packages compare what they read against them, and some were
// written against the copies these functions replaced, so a change of the
// sequence would change what those tests check.
func TestDataIsStable(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"Pattern(70000, 2)", Pattern(70_000, 2), "70b05cf76c9d3c2df5570bedd290dd5f607c23e7e2e130a76706002a9b559bdc"},
		{"Pattern(1000, 0)", Pattern(1000, 0), "e692ec244b05f154c01cfc622c52a0aa04ef3d25cc1ff136de45fd625f59dea4"},
		{"RandomBytes(5<<20+12345, 3)", RandomBytes(5<<20+12345, 3), "cf03136422c872d12db8bf3f28afa6a024a3ac651aeae6e0d792635b960dda07"},
	} {
		if got := fmt.Sprintf("%x", sha256.Sum256(tc.data)); got != tc.want {
			t.Errorf("%s: sha256 %s, want %s", tc.name, got, tc.want)
		}
	}
	if bytes.Equal(Pattern(100, 1), Pattern(100, 2)) {
		t.Error("Pattern: seeds 1 and 2 give the same bytes")
	}
	if bytes.Equal(RandomBytes(100, 1), RandomBytes(100, 2)) {
		t.Error("RandomBytes: seeds 1 and 2 give the same bytes")
	}
}

func TestCtxEnds(t *testing.T) {
	ctx := Ctx(t, time.Millisecond)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the context did not end after its duration")
	}
}
