package objmeta

import (
	"fmt"
	"hash/fnv"
	"path"
	"strings"
	"time"
	"unicode/utf8"
)

// The name a local version is saved under after a write conflict must be
// a name the mount can show and the bucket can take: a path component of
// at most maxSegment bytes (longer ones are hidden: a file name cannot be
// longer), and an object name of at most maxObjectName bytes of UTF-8
// (GCS refuses longer ones, and would refuse the upload forever).
const (
	maxSegment    = 255
	maxObjectName = 1024
)

// ConflictName is the object name a local version of name is saved under
// when the object it was based on changed in the bucket meanwhile:
// NAME.bucketfs-conflict-YYYYMMDDTHHMMSSZ, with -2, -3... (try) if that
// is taken. If that is too long for a file name (255 bytes) or an object
// name (1024), the base name is cut short, on a UTF-8 character
// boundary, and ~ and 8 hex digits of a hash of the whole base name
// follow it, so that two long names cut alike get copies of their own:
// STEM~HASH.EXT.bucketfs-conflict-..., the extension (up to 16 bytes)
// kept where it fits. In the rare directory too deep to hold even that,
// the copy goes to the deepest directory above it that can.
func ConflictName(name string, at time.Time, try int) string {
	suffix := ".bucketfs-conflict-" + at.UTC().Format("20060102T150405Z")
	if try > 1 {
		suffix += fmt.Sprintf("-%d", try)
	}
	dir, base := splitDir(name)
	if fits(dir, base+suffix) {
		return name + suffix
	}
	h := fnv.New32a()
	h.Write([]byte(base))
	tag := fmt.Sprintf("~%08x", h.Sum32())
	ext := path.Ext(base)
	if len(ext) > 16 || ext == base {
		ext = ""
	}
	stem := strings.TrimSuffix(base, ext)
	for {
		room := min(maxSegment, maxObjectName-len(dir)) - len(suffix) - len(tag)
		if room-len(ext) < 1 {
			ext = "" // the extension goes before the stem's first byte does
		}
		if room-len(ext) >= 1 || dir == "" {
			return dir + cutUTF8(stem, room-len(ext)) + tag + ext + suffix
		}
		dir, _ = splitDir(strings.TrimSuffix(dir, "/")) // too deep: one up
	}
}

// splitDir splits an object name after its last '/'.
func splitDir(name string) (dir, base string) {
	i := strings.LastIndexByte(name, '/')
	return name[:i+1], name[i+1:]
}

// fits reports whether base, in directory dir, is a file name and an
// object name that fit.
func fits(dir, base string) bool {
	return len(base) <= maxSegment && len(dir)+len(base) <= maxObjectName
}

// cutUTF8 returns s cut to at most n bytes, never in the middle of a
// UTF-8 character.
func cutUTF8(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
