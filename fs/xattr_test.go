package fs

import (
	"bytes"
	"strings"
	"syscall"
	"testing"
)

// Names and values survive their metadata encoding whatever their bytes,
// and the keys and values written are header text a store may fold to
// lower case (keys) or trim (values) without changing them.
func TestXattrEncoding(t *testing.T) {
	names := []string{"a", "Upper", "with space", "größe", "%41", "a/b:c", "\x01\xff", strings.Repeat("n", 250)}
	for _, n := range names {
		key, errno := xattrKey("user."+n, false)
		if errno != 0 {
			t.Fatalf("xattrKey(user.%q): %v", n, errno)
		}
		rest := strings.TrimPrefix(key, xattrKeyPrefix)
		if rest != strings.ToLower(rest) || strings.ContainsAny(rest, " \t\r\n:/") {
			t.Errorf("the key of %q is %q: not lower-case header text", n, key)
		}
		if got, ok := unescapeXattrName(rest); !ok || got != n {
			t.Errorf("the key of %q reads back as %q (%v)", n, got, ok)
		}
	}
	values := [][]byte{nil, []byte("text"), []byte(" lead"), []byte("trail "), {0, 1, 255}, []byte("line\nbreak"), []byte("t:looks encoded")}
	for _, v := range values {
		enc := encodeXattrValue(v)
		if enc == "" || strings.TrimSpace(enc) != enc {
			t.Errorf("value %q is kept as %q: empty, or with blanks a header would lose", v, enc)
		}
		if got := decodeXattrValue(enc); !bytes.Equal(got, v) && !(len(v) == 0 && len(got) == 0) {
			t.Errorf("value %q reads back as %q", v, got)
		}
	}
}

func TestXattrKeyNamespaces(t *testing.T) {
	for _, c := range []struct {
		attr     string
		get, set syscall.Errno
	}{
		{"user.", syscall.EINVAL, syscall.EINVAL},
		{"security.capability", syscall.ENODATA, syscall.EOPNOTSUPP},
		{"trusted.x", syscall.ENODATA, syscall.EOPNOTSUPP},
		{"system.posix_acl_access", syscall.EOPNOTSUPP, syscall.EOPNOTSUPP},
		{"other.x", syscall.EOPNOTSUPP, syscall.EOPNOTSUPP},
	} {
		if _, errno := xattrKey(c.attr, true); errno != c.get {
			t.Errorf("get %s: %v, want %v", c.attr, errno, c.get)
		}
		if _, errno := xattrKey(c.attr, false); errno != c.set {
			t.Errorf("set %s: %v, want %v", c.attr, errno, c.set)
		}
	}
}

// The room for attributes: E2BIG for one that could never fit, ENOSPC
// for one that does not fit beside the others; bucketfs's own keys are
// not counted (they have their reserve), the replaced value is not.
func TestXattrFits(t *testing.T) {
	md := map[string]string{modeKey: "644", "gcsfuse_mtime": strings.Repeat("t", 40)}
	if errno := xattrFits(md, "k", strings.Repeat("v", xattrSpace)); errno != syscall.E2BIG {
		t.Errorf("one value over the space: %v, want E2BIG", errno)
	}
	if errno := xattrFits(md, "k", strings.Repeat("v", xattrSpace-1)); errno != 0 {
		t.Errorf("one value filling the space: %v", errno)
	}
	md["a"] = strings.Repeat("a", 5000)
	if errno := xattrFits(md, "k", strings.Repeat("v", 3000)); errno != syscall.ENOSPC {
		t.Errorf("a value beside another: %v, want ENOSPC", errno)
	}
	if errno := xattrFits(md, "a", strings.Repeat("v", 7000)); errno != 0 {
		t.Errorf("replacing the other: %v", errno)
	}
}
