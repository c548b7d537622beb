package fs

import (
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "a.txt": true, "ünïcode ✓": true, strings.Repeat("x", 255): true,
		"": false, ".": false, "..": false, strings.Repeat("x", 256): false,
		"a/b": false, "nul\x00": false, "...": true,
	} {
		if got := validName(name); got != want {
			t.Errorf("validName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestParentPrefix(t *testing.T) {
	for name, want := range map[string]string{
		"a": "", "a/b": "a/", "a/b/c": "a/b/", "a//b": "a//",
	} {
		if got := parentPrefix(name); got != want {
			t.Errorf("parentPrefix(%q) = %q, want %q", name, got, want)
		}
	}
}
