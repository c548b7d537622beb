package fs

import (
	"context"
	"encoding/base64"
	"sort"
	"strings"
	"syscall"

	"github.com/bucketfs/bucketfs/cache"
	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// Extended attributes. user.NAME lives in the object's custom metadata
// (of a directory: its placeholder "dir/") under the key xattrKeyPrefix +
// NAME escaped (xattrKey), so that a change of xattrs alone is a metadata
// patch, sent through the cache in order with the file's other changes
// (as chmod is), and survives a remount. Metadata is header text: the
// name keeps only bytes a lower-case header name can hold, the others
// become %xx; a value of printable ASCII is kept as "t:" and the text,
// any other as "b:" and its base64. A value set by another client without
// either prefix is taken as it is.
//
// Other namespaces are answered at once, from memory: the kernel asks
// for security.capability before every write to a file, which must cost
// nothing. security.* and trusted.* are not kept (a local disk keeps
// them): security labels would be the bucket's to grant (file
// capabilities), and trusted.* names would show in listxattr to every
// user, since the kernel leaves the filtering to the file system. get
// answers ENODATA, set EOPNOTSUPP, remove ENODATA. system.* (other than
// the POSIX ACLs, which the kernel answers itself for a FUSE mount
// without ACL support) and unknown namespaces are EOPNOTSUPP, as ext4
// answers. The price: each write(2) costs one more FUSE request (the
// kernel's GETXATTR of security.capability), where ENOSYS once made it
// stop asking.
//
// A removed attribute leaves its key with an empty value: a metadata
// patch can set keys but not delete them (transfer.Bucket.SetMetadata).
// An empty value means "absent"; setting the name again reuses the key.
const xattrKeyPrefix = "bucketfs-xattr-"

// metadataLimit is GCS's limit on an object's custom metadata, keys and
// values together; xattrReserve of it is kept for bucketfs's own keys
// (mode, owner, time, type, upload ID) which a later change may add.
const (
	metadataLimit = 8 << 10
	xattrReserve  = 512
	xattrSpace    = metadataLimit - xattrReserve
)

// ownKeys are the metadata keys xattrReserve is kept for.
var ownKeys = map[string]bool{
	modeKey: true, uidKey: true, gidKey: true, typeKey: true, rdevKey: true,
	cache.MtimeKey: true, cache.AttemptKey: true, ctimeKey: true, atimeKey: true, futureMtimeKey: true,
}

const (
	xattrCreate  = 1 // XATTR_CREATE
	xattrReplace = 2 // XATTR_REPLACE
)

// xattrKey is the metadata key of user.* attribute attr; EINVAL for
// "user." alone, EOPNOTSUPP (or ENODATA for get and remove, getOrRemove)
// for the namespaces not kept.
func xattrKey(attr string, getOrRemove bool) (string, syscall.Errno) {
	name, ok := strings.CutPrefix(attr, "user.")
	switch {
	case ok && name == "":
		return "", syscall.EINVAL
	case ok:
		return xattrKeyPrefix + escapeXattrName(name), 0
	case getOrRemove && (strings.HasPrefix(attr, "security.") || strings.HasPrefix(attr, "trusted.")):
		return "", syscall.ENODATA
	}
	return "", syscall.EOPNOTSUPP
}

func plainKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// escapeXattrName writes name with only lower-case letters, digits, '.',
// '_' and '-'; any other byte is %xx (lower-case hex), so that a store
// which folds header names to lower case keeps the name.
func escapeXattrName(name string) string {
	const hex = "0123456789abcdef"
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if c := name[i]; plainKeyByte(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// unescapeXattrName undoes escapeXattrName; false if s is not its output.
func unescapeXattrName(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, lo := unhex(s[i+1]), unhex(s[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return b.String(), b.Len() > 0
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// encodeXattrValue is the metadata value of attribute value v: never
// empty (empty means absent).
func encodeXattrValue(v []byte) string {
	text := len(v) == 0 || v[len(v)-1] != ' ' // a header's trailing blanks are not kept
	for _, c := range v {
		if c < 0x20 || c > 0x7e {
			text = false
			break
		}
	}
	if text {
		return "t:" + string(v)
	}
	return "b:" + base64.StdEncoding.EncodeToString(v)
}

// decodeXattrValue undoes encodeXattrValue; a value without its prefixes
// (set by another client) is the value itself.
func decodeXattrValue(s string) []byte {
	if t, ok := strings.CutPrefix(s, "t:"); ok {
		return []byte(t)
	}
	if b, ok := strings.CutPrefix(s, "b:"); ok {
		if v, err := base64.StdEncoding.DecodeString(b); err == nil {
			return v
		}
	}
	return []byte(s)
}

// xattrFits says whether key with value enc fits in metadata md: 0, E2BIG
// if it could never fit (even alone), ENOSPC if the other attributes
// leave no room for it.
func xattrFits(md map[string]string, key, enc string) syscall.Errno {
	need := len(key) + len(enc)
	if need > xattrSpace {
		return syscall.E2BIG
	}
	used := 0
	for k, v := range md {
		if k != key && !ownKeys[k] {
			used += len(k) + len(v)
		}
	}
	if used+need > xattrSpace {
		return syscall.ENOSPC
	}
	return 0
}

// xattrStore is where a node keeps its attributes: its current metadata,
// and how to set keys of it.
type xattrStore interface {
	xattrMeta(ctx context.Context) (map[string]string, syscall.Errno)
	setXattrMeta(ctx context.Context, md map[string]string) syscall.Errno
}

// getxattr answers getxattr(2) of attr on s into dest (size query: an
// empty dest).
func getxattr(ctx context.Context, s xattrStore, attr string, dest []byte) (uint32, syscall.Errno) {
	key, errno := xattrKey(attr, true)
	if errno != 0 {
		return 0, errno
	}
	md, errno := s.xattrMeta(ctx)
	if errno != 0 {
		return 0, errno
	}
	enc := md[key]
	if enc == "" {
		return 0, syscall.ENODATA
	}
	v := decodeXattrValue(enc)
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE // go-fuse answers a size query (no buffer) with the size
	}
	return uint32(copy(dest, v)), 0
}

// setxattr answers setxattr(2) on s.
func setxattr(ctx context.Context, s xattrStore, readOnly bool, attr string, data []byte, flags uint32) syscall.Errno {
	key, errno := xattrKey(attr, false)
	if errno != 0 {
		return errno
	}
	if readOnly {
		return syscall.EROFS
	}
	md, errno := s.xattrMeta(ctx)
	if errno != 0 {
		return errno
	}
	exists := md[key] != ""
	switch {
	case flags&xattrCreate != 0 && exists:
		return syscall.EEXIST
	case flags&xattrReplace != 0 && !exists:
		return syscall.ENODATA
	}
	enc := encodeXattrValue(data)
	if errno := xattrFits(md, key, enc); errno != 0 {
		return errno
	}
	return s.setXattrMeta(ctx, withCtime(map[string]string{key: enc}))
}

// listxattr answers listxattr(2) on s: the user.* names, sorted, each
// ending in NUL.
func listxattr(ctx context.Context, s xattrStore, dest []byte) (uint32, syscall.Errno) {
	md, errno := s.xattrMeta(ctx)
	if errno != 0 {
		return 0, errno
	}
	var list []string
	for k, v := range md {
		rest, ok := strings.CutPrefix(k, xattrKeyPrefix)
		if !ok || v == "" {
			continue
		}
		// Only keys as escapeXattrName writes them: getxattr finds
		// those (another client may have set others).
		if name, ok := unescapeXattrName(rest); ok && escapeXattrName(name) == rest {
			list = append(list, "user."+name+"\x00")
		}
	}
	sort.Strings(list)
	out := strings.Join(list, "")
	if len(dest) < len(out) {
		return uint32(len(out)), syscall.ERANGE
	}
	return uint32(copy(dest, out)), 0
}

// removexattr answers removexattr(2) on s.
func removexattr(ctx context.Context, s xattrStore, readOnly bool, attr string) syscall.Errno {
	key, errno := xattrKey(attr, true)
	if errno != 0 {
		return errno
	}
	if readOnly {
		return syscall.EROFS
	}
	md, errno := s.xattrMeta(ctx)
	if errno != 0 {
		return errno
	}
	if md[key] == "" {
		return syscall.ENODATA
	}
	return s.setXattrMeta(ctx, withCtime(map[string]string{key: ""}))
}

var (
	_ gofs.NodeGetxattrer    = (*fileNode)(nil)
	_ gofs.NodeSetxattrer    = (*fileNode)(nil)
	_ gofs.NodeListxattrer   = (*fileNode)(nil)
	_ gofs.NodeRemovexattrer = (*fileNode)(nil)
	_ gofs.NodeGetxattrer    = (*dirNode)(nil)
	_ gofs.NodeSetxattrer    = (*dirNode)(nil)
	_ gofs.NodeListxattrer   = (*dirNode)(nil)
	_ gofs.NodeRemovexattrer = (*dirNode)(nil)
	_ gofs.NodeGetxattrer    = (*symlinkNode)(nil)
	_ gofs.NodeSetxattrer    = (*symlinkNode)(nil)
	_ gofs.NodeListxattrer   = (*symlinkNode)(nil)
	_ gofs.NodeRemovexattrer = (*symlinkNode)(nil)
)

// The nodes' stores: a file keeps its attributes in its object's
// metadata, through the cache (fileNode.setMeta, as chmod); a directory
// in its placeholder's (made for them if there is none); the root has no
// object and keeps none (EOPNOTSUPP). A symbolic link or a special file
// never gets here for user.*: the kernel refuses user.* on them itself
// (EPERM to set, ENODATA to get), as on every Linux file system.

func (n *fileNode) xattrMeta(ctx context.Context) (map[string]string, syscall.Errno) {
	return n.currentAttrs().Metadata, 0
}

func (n *fileNode) setXattrMeta(ctx context.Context, md map[string]string) syscall.Errno {
	// An open file whose name is gone: nothing of it reaches the bucket,
	// but its handles see the change while they live.
	if !n.isUnlinked() {
		if err := n.setMeta(ctx, md); err != nil {
			return n.fsys.errno(ctx, "setxattr", n.objName(), err)
		}
	}
	// The node's own attributes follow too, for when the cache no longer
	// has the copy to tell (currentAttrs).
	n.mu.Lock()
	n.attrs.Metadata = withMeta(n.attrs.Metadata, md)
	n.mu.Unlock()
	return 0
}

func (d *dirNode) xattrMeta(ctx context.Context) (map[string]string, syscall.Errno) {
	prefix := d.prefix()
	if prefix == "" {
		return nil, 0
	}
	ph, _, err := d.fsys.names.DirAttrs(ctx, prefix)
	if err != nil {
		return nil, d.fsys.errno(ctx, "getxattr", prefix, err)
	}
	return ph.Metadata, 0
}

func (d *dirNode) setXattrMeta(ctx context.Context, md map[string]string) syscall.Errno {
	prefix := d.prefix()
	if prefix == "" {
		return syscall.EOPNOTSUPP
	}
	if err := d.setMeta(ctx, prefix, md); err != nil {
		return d.fsys.errno(ctx, "setxattr", prefix, err)
	}
	return 0
}

func (s *symlinkNode) xattrMeta(ctx context.Context) (map[string]string, syscall.Errno) {
	return s.attrs().Metadata, 0
}

func (s *symlinkNode) setXattrMeta(ctx context.Context, md map[string]string) syscall.Errno {
	return syscall.EPERM // what the kernel answers before asking (see above)
}

// Getxattr implements gofs.NodeGetxattrer.
func (n *fileNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return getxattr(uninterrupted(ctx), n, attr, dest)
}

// Setxattr implements gofs.NodeSetxattrer.
func (n *fileNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return setxattr(uninterrupted(ctx), n, n.fsys.opts.ReadOnly, attr, data, flags)
}

// Listxattr implements gofs.NodeListxattrer.
func (n *fileNode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return listxattr(uninterrupted(ctx), n, dest)
}

// Removexattr implements gofs.NodeRemovexattrer.
func (n *fileNode) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return removexattr(uninterrupted(ctx), n, n.fsys.opts.ReadOnly, attr)
}

// Getxattr implements gofs.NodeGetxattrer.
func (d *dirNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return getxattr(uninterrupted(ctx), d, attr, dest)
}

// Setxattr implements gofs.NodeSetxattrer.
func (d *dirNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return setxattr(uninterrupted(ctx), d, d.fsys.opts.ReadOnly, attr, data, flags)
}

// Listxattr implements gofs.NodeListxattrer.
func (d *dirNode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return listxattr(uninterrupted(ctx), d, dest)
}

// Removexattr implements gofs.NodeRemovexattrer.
func (d *dirNode) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return removexattr(uninterrupted(ctx), d, d.fsys.opts.ReadOnly, attr)
}

// Getxattr implements gofs.NodeGetxattrer.
func (s *symlinkNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return getxattr(ctx, s, attr, dest)
}

// Setxattr implements gofs.NodeSetxattrer.
func (s *symlinkNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return setxattr(ctx, s, s.fsys.opts.ReadOnly, attr, data, flags)
}

// Listxattr implements gofs.NodeListxattrer.
func (s *symlinkNode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return listxattr(ctx, s, dest)
}

// Removexattr implements gofs.NodeRemovexattrer.
func (s *symlinkNode) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return removexattr(ctx, s, s.fsys.opts.ReadOnly, attr)
}
