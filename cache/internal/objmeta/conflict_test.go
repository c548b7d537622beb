package objmeta

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// A conflict copy's name fits a file name (255 bytes) and an object name
// (1024), keeps the suffix, the extension where it fits, valid UTF-8,
// and differs for two long names that are cut alike.
func TestConflictNameFits(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	const suffix = ".bucketfs-conflict-20250304T050607Z"
	if got := ConflictName("a/doc.txt", at, 1); got != "a/doc.txt"+suffix {
		t.Errorf("short name: %q", got)
	}
	if got := ConflictName("doc", at, 3); got != "doc"+suffix+"-3" {
		t.Errorf("third try: %q", got)
	}
	deep := strings.Repeat("d/", 505) // 1010 bytes of directories
	cases := []struct {
		name, ext string
	}{
		{"dir/" + strings.Repeat("x", 220) + ".txt", ".txt"}, // 256 bytes with the suffix
		{"dir/" + strings.Repeat("x", 251) + ".txt", ".txt"}, // the longest file name
		{strings.Repeat("é", 125) + ".jpeg", ".jpeg"},        // cut inside a 2-byte character
		{strings.Repeat("p/", 390) + strings.Repeat("y", 200) + ".tar", ".tar"},
		{strings.Repeat("q", 1000) + "/" + strings.Repeat("z", 23), ""},
		{strings.Repeat("x", 250) + "." + strings.Repeat("e", 40), ""}, // an "extension" too long to keep
		{deep + "abc.txt", ""}, // no room for a copy in its own directory
	}
	for _, c := range cases {
		for try := 1; try <= 12; try += 11 {
			got := ConflictName(c.name, at, try)
			want := suffix
			if try > 1 {
				want += "-12"
			}
			seg := got[strings.LastIndexByte(got, '/')+1:]
			switch {
			case len(seg) > maxSegment || len(got) > maxObjectName:
				t.Errorf("%d-byte name, try %d: copy %q has a %d-byte file name, %d bytes in all", len(c.name), try, got, len(seg), len(got))
			case !strings.HasSuffix(got, c.ext+want):
				t.Errorf("%d-byte name, try %d: copy %q does not end in %q", len(c.name), try, got, c.ext+want)
			case !utf8.ValidString(got):
				t.Errorf("%d-byte name, try %d: copy %q is not valid UTF-8", len(c.name), try, got)
			}
		}
	}
	// Two long names alike up to the cut get copies of their own, in the
	// same directory.
	a := ConflictName("dir/"+strings.Repeat("x", 240)+"-1.log", at, 1)
	b := ConflictName("dir/"+strings.Repeat("x", 240)+"-2.log", at, 1)
	if a == b || !strings.HasPrefix(a, "dir/x") || !strings.HasPrefix(b, "dir/x") {
		t.Errorf("two long names give %q and %q", a, b)
	}
	// The deep case goes to a directory above, as deep as it can.
	if got := ConflictName(deep+"abc.txt", at, 1); !strings.HasPrefix(got, strings.Repeat("d/", 480)) {
		t.Errorf("a copy of a file too deep for one goes to %q", got)
	}
}
