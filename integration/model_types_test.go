package integration

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The model tester's special files and extended attributes: the
// operations (modelTypesOp), what a tree entry shows of them
// (specialOf, userXattrsOf), and how the bucket keeps them (specialKept,
// bucketXattrs), decoded here on their own from the metadata format
// README describes, not with the mount's code.

// modelTypesOp applies op ("mknod", "setxattr" or "removexattr") with
// both and says what it did ("" if it found nothing to do it on); made is
// the path of a new special file.
func modelTypesOp(op string, rng *rand.Rand, st *modelState, both func(func(root string) error)) (what, made string) {
	switch op {
	case "mknod":
		p := st.newPath(rng)
		kinds := []struct {
			name string
			mode uint32
			dev  int
		}{
			{"fifo", unix.S_IFIFO | 0o640, 0},
			{"socket", unix.S_IFSOCK | 0o600, 0},
			{"char", unix.S_IFCHR | 0o644, int(unix.Mkdev(1, 3))},
			{"block", unix.S_IFBLK | 0o600, int(unix.Mkdev(7, uint32(rng.IntN(300))))},
		}
		k := kinds[rng.IntN(len(kinds))]
		both(func(root string) error { return unix.Mknod(filepath.Join(root, p), k.mode, k.dev) })
		return fmt.Sprintf("mknod %s %s", p, k.name), p
	case "setxattr", "removexattr":
		// On a file, a link or special file (EPERM or ENODATA on both
		// sides: the kernel's rule), or a directory other than the root
		// (which keeps no attributes on the mount).
		p := st.pickFile(rng)
		if rng.IntN(3) == 0 {
			p = st.pickDir(rng)
		}
		if p == "" {
			return "", ""
		}
		name := "user." + []string{"a", "Bee", "with space", "ü"}[rng.IntN(4)]
		if op == "removexattr" {
			both(func(root string) error { return unix.Lremovexattr(filepath.Join(root, p), name) })
			return fmt.Sprintf("removexattr %s %s", p, name), ""
		}
		val := make([]byte, rng.IntN(300))
		for i := range val {
			val[i] = byte(rng.IntN(256))
			if rng.IntN(2) == 0 {
				val[i] = 'a' + byte(i%26) // text, kept as text
			}
		}
		flags := []int{0, 0, unix.XATTR_CREATE, unix.XATTR_REPLACE}[rng.IntN(4)]
		both(func(root string) error { return unix.Lsetxattr(filepath.Join(root, p), name, val, flags) })
		return fmt.Sprintf("setxattr %s %s (%d bytes, flags %d)", p, name, len(val), flags), ""
	}
	panic("modelTypesOp: " + op)
}

// specialOf describes the special file at path: its type, and a
// device's number.
func specialOf(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return "", err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "fifo", nil
	case unix.S_IFSOCK:
		return "socket", nil
	case unix.S_IFCHR:
		return fmt.Sprintf("char %d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev)), nil
	case unix.S_IFBLK:
		return fmt.Sprintf("block %d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev)), nil
	}
	return "", fmt.Errorf("%s: mode %o is no special file", path, st.Mode)
}

// specialKept says how the bucket's object (content, md) fails to keep
// the special file described by want ("" if it keeps it).
func specialKept(content []byte, md map[string]string, want string) string {
	got := md["bucketfs-type"]
	if got == "char" || got == "block" {
		dev, _ := strconv.ParseUint(md["bucketfs-rdev"], 10, 32)
		got = fmt.Sprintf("%s %d:%d", got, unix.Major(dev), unix.Minor(dev))
	}
	if got != want || len(content) != 0 {
		return fmt.Sprintf("a special file (%s) in the reference; the bucket has %d bytes, metadata %v", want, len(content), md)
	}
	return ""
}

// userXattrsOf lists the user.* attributes of path (not following a
// link) as "name=hex value", sorted.
func userXattrsOf(path string) (string, error) {
	buf := make([]byte, 65536)
	n, err := unix.Llistxattr(path, buf)
	if err != nil {
		return "", err
	}
	var out []string
	for _, name := range splitNul(buf[:n]) {
		if !strings.HasPrefix(name, "user.") {
			continue
		}
		v := make([]byte, 65536)
		m, err := unix.Lgetxattr(path, name, v)
		if err != nil {
			return "", fmt.Errorf("getxattr %s of %s: %w", name, path, err)
		}
		out = append(out, fmt.Sprintf("%s=%x", name, v[:m]))
	}
	sort.Strings(out)
	return strings.Join(out, " "), nil
}

// bucketXattrs reads the user.* attributes kept in an object's metadata,
// as userXattrsOf lists them: key "bucketfs-xattr-" and the name with
// %xx escapes, value "t:" and text or "b:" and base64; an empty value is
// a removed attribute.
func bucketXattrs(md map[string]string) string {
	var out []string
	for k, v := range md {
		rest, ok := strings.CutPrefix(k, "bucketfs-xattr-")
		if !ok || v == "" {
			continue
		}
		name, err := unescapePercent(rest)
		if err != nil {
			out = append(out, fmt.Sprintf("(bad key %q)", k))
			continue
		}
		var val []byte
		switch {
		case strings.HasPrefix(v, "t:"):
			val = []byte(v[2:])
		case strings.HasPrefix(v, "b:"):
			if val, err = base64.StdEncoding.DecodeString(v[2:]); err != nil {
				out = append(out, fmt.Sprintf("(bad value of %q)", k))
				continue
			}
		default:
			out = append(out, fmt.Sprintf("(unknown encoding of %q)", k))
			continue
		}
		out = append(out, fmt.Sprintf("user.%s=%x", name, val))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func unescapePercent(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("%q: a cut escape", s)
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", err
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), nil
}
