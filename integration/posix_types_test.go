package integration

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Cases of the POSIX suite for special files (FIFOs, devices, sockets)
// and extended attributes beyond xattrCases. The suite runs as root, as
// mknod of a device needs CAP_MKNOD.

// typeName is the type of a directory entry or stat mode, as ls -l's
// first letter would say it.
func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "char"
	case m&fs.ModeDevice != 0:
		return "block"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsDir():
		return "dir"
	}
	return "file"
}

// lsTypes records the names in dir with the type readdir gives (d_type),
// sorted.
func (o *obs) lsTypes(what, dir string) {
	des, err := os.ReadDir(dir)
	if err != nil {
		o.err(what, err)
		return
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name()+":"+typeName(de.Type()))
	}
	sort.Strings(names)
	o.add("%s: %q", what, names)
}

// special records lstat of path with what matters for a special file:
// type, permission bits, owner, device number, size, link count.
func (o *obs) special(what, path string) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		o.err(what, err)
		return
	}
	o.add("%s: mode=%o owner=%d:%d rdev=%d:%d size=%d nlink=%d", what, st.Mode, st.Uid, st.Gid,
		unix.Major(st.Rdev), unix.Minor(st.Rdev), st.Size, st.Nlink)
}

// mtime records the modification time of path (not following a link).
func (o *obs) mtimeExact(what, path string) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		o.err(what, err)
		return
	}
	o.add("%s: mtime %d.%09d", what, st.Mtim.Sec, st.Mtim.Nsec)
}

// bindSocket binds a unix socket to path, as a server does, and records
// the outcome; the socket is returned (-1 if it failed). A path relative
// to an open directory keeps sun_path under its 108 bytes.
func (o *obs) bindSocket(what, dir, name string) (sock int, addr string, closeDir func()) {
	d, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		o.err(what+" (open dir)", err)
		return -1, "", func() {}
	}
	addr = fmt.Sprintf("/proc/self/fd/%d/%s", d, name)
	s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		unix.Close(d)
		o.err(what+" (socket)", err)
		return -1, "", func() {}
	}
	err = unix.Bind(s, &unix.SockaddrUnix{Name: addr})
	o.err(what, err)
	if err != nil {
		unix.Close(s)
		s = -1
	}
	return s, addr, func() { unix.Close(d) }
}

var specialCases = []posixCase{
	{"special/fifo", func(t *testing.T, root string) *obs {
		o := &obs{}
		p := pj(root, "p")
		o.err("mkfifo", unix.Mkfifo(p, 0o640))
		o.special("stat", p)
		o.lsTypes("ls", root)
		o.err("mkfifo again", unix.Mkfifo(p, 0o640))
		// The kernel gives it its behaviour: a pipe between two opens.
		r := o.open("open for reading", p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
		w := o.open("open for writing", p, unix.O_WRONLY|unix.O_NONBLOCK, 0)
		if w >= 0 {
			n, err := unix.Write(w, []byte("through the pipe"))
			o.n("write", n, err)
		}
		if r >= 0 {
			buf := make([]byte, 64)
			n, err := unix.Read(r, buf)
			o.data("read", buf[:max(n, 0)], err)
		}
		o.close("close writer", w)
		o.close("close reader", r)
		o.err("chmod", unix.Chmod(p, 0o600))
		o.err("chown", unix.Lchown(p, 1234, 5678))
		ts := []unix.Timespec{unix.NsecToTimespec(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC).UnixNano()),
			unix.NsecToTimespec(time.Date(2002, 3, 4, 5, 6, 7, 0, time.UTC).UnixNano())}
		o.err("utimes", unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW))
		o.special("stat after chmod, chown", p)
		o.mtimeExact("mtime", p)
		o.err("rename", unix.Rename(p, pj(root, "q")))
		o.special("stat the new name", pj(root, "q"))
		o.special("stat the old name", p)
		o.err("truncate", unix.Truncate(pj(root, "q"), 0))
		o.err("unlink", unix.Unlink(pj(root, "q")))
		o.lsTypes("ls", root)
		return o
	}},
	{"special/devices", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.err("mknod char 1,3", unix.Mknod(pj(root, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
		o.err("mknod block 7,200", unix.Mknod(pj(root, "loop"), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 200))))
		o.err("mknod char 4095,1048575", unix.Mknod(pj(root, "big"), unix.S_IFCHR|0o644, int(unix.Mkdev(4095, 1048575))))
		o.special("null", pj(root, "null"))
		o.special("loop", pj(root, "loop"))
		o.special("big", pj(root, "big"))
		o.lsTypes("ls", root)
		o.err("mknod over an existing name", unix.Mknod(pj(root, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))))
		o.err("rename a device over another", unix.Rename(pj(root, "big"), pj(root, "loop")))
		o.special("loop", pj(root, "loop"))
		o.err("chmod", unix.Chmod(pj(root, "loop"), 0o640))
		o.special("loop", pj(root, "loop"))
		o.lsTypes("ls", root)
		for _, n := range []string{"null", "loop"} {
			o.err("unlink "+n, unix.Unlink(pj(root, n)))
		}
		o.lsTypes("ls", root)
		return o
	}},
	{"special/device-open", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.err("mknod char 1,3", unix.Mknod(pj(root, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
		fd := o.open("open /dev/null's twin", pj(root, "null"), unix.O_RDWR, 0)
		o.close("close", fd)
		return o
	}},
	{"special/socket", func(t *testing.T, root string) *obs {
		o := &obs{}
		s, addr, closeDir := o.bindSocket("bind", root, "sock")
		defer closeDir()
		if s < 0 {
			return o
		}
		defer unix.Close(s)
		o.special("stat", pj(root, "sock"))
		o.lsTypes("ls", root)
		o.err("listen", unix.Listen(s, 1))
		c, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			o.err("socket", err)
			return o
		}
		defer unix.Close(c)
		o.err("connect", unix.Connect(c, &unix.SockaddrUnix{Name: addr}))
		a, _, err := unix.Accept(s)
		o.err("accept", err)
		if err == nil {
			defer unix.Close(a)
			n, err := unix.Write(c, []byte("hello"))
			o.n("send", n, err)
			buf := make([]byte, 16)
			n, err = unix.Read(a, buf)
			o.data("receive", buf[:max(n, 0)], err)
		}
		_, _, closeDir2 := o.bindSocket("bind again", root, "sock")
		closeDir2()
		o.err("mknod S_IFSOCK", unix.Mknod(pj(root, "made"), unix.S_IFSOCK|0o600, 0))
		o.special("made", pj(root, "made"))
		o.err("rename", unix.Rename(pj(root, "sock"), pj(root, "moved")))
		o.err("unlink", unix.Unlink(pj(root, "moved")))
		o.lsTypes("ls", root)
		return o
	}},
	{"special/setgid-dir", func(t *testing.T, root string) *obs {
		// In a setgid directory a new node takes the directory's group.
		o := &obs{}
		d := pj(root, "d")
		o.mkdir(d)
		o.err("chown d", unix.Chown(d, 0, 4321))
		o.err("chmod d 2775", unix.Chmod(d, 0o2775))
		o.err("mkfifo", unix.Mkfifo(pj(d, "p"), 0o644))
		o.err("mknod sock", unix.Mknod(pj(d, "s"), unix.S_IFSOCK|0o644, 0))
		o.special("p", pj(d, "p"))
		o.special("s", pj(d, "s"))
		o.err("mkfifo outside", unix.Mkfifo(pj(root, "p"), 0o644))
		o.special("p outside", pj(root, "p"))
		return o
	}},
	{"special/every-type", func(t *testing.T, root string) *obs {
		// What a conformance suite loops over: every type of file,
		// renamed over each other, chmod, chown, unlink.
		o := &obs{}
		o.mkfile(pj(root, "file"), []byte("data"))
		o.mkdir(pj(root, "dir"))
		o.err("symlink", unix.Symlink("file", pj(root, "link")))
		o.err("mkfifo", unix.Mkfifo(pj(root, "fifo"), 0o644))
		o.err("mknod sock", unix.Mknod(pj(root, "sock"), unix.S_IFSOCK|0o644, 0))
		o.err("mknod chr", unix.Mknod(pj(root, "chr"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 7))))
		o.err("mknod blk", unix.Mknod(pj(root, "blk"), unix.S_IFBLK|0o644, int(unix.Mkdev(8, 1))))
		o.err("mknod reg", unix.Mknod(pj(root, "reg"), unix.S_IFREG|0o600, 0))
		o.lsTypes("ls", root)
		o.special("reg", pj(root, "reg"))
		for _, n := range []string{"fifo", "sock", "chr", "blk"} {
			o.err("chown "+n, unix.Lchown(pj(root, n), 65534, 65534))
			o.err("chmod "+n, unix.Chmod(pj(root, n), 0o604))
			o.special(n, pj(root, n))
		}
		o.err("rename file over fifo", unix.Rename(pj(root, "file"), pj(root, "fifo")))
		o.err("rename sock over file's old name", unix.Rename(pj(root, "sock"), pj(root, "file")))
		o.err("rename chr over a directory", unix.Rename(pj(root, "chr"), pj(root, "dir")))
		o.err("rename a directory over blk", unix.Rename(pj(root, "dir"), pj(root, "blk")))
		o.err("rename blk into dir", unix.Rename(pj(root, "blk"), pj(root, "dir", "blk")))
		o.err("rmdir a fifo", unix.Rmdir(pj(root, "fifo")))
		o.err("mkdir over a fifo", unix.Mkdir(pj(root, "fifo"), 0o755))
		o.lsTypes("ls", root)
		o.lsTypes("ls dir", pj(root, "dir"))
		o.special("dir/blk", pj(root, "dir", "blk"))
		o.err("rename dir", unix.Rename(pj(root, "dir"), pj(root, "dir2")))
		o.special("dir2/blk", pj(root, "dir2", "blk"))
		for _, n := range []string{"fifo", "file", "chr", "link", "reg", "dir2/blk"} {
			o.err("unlink "+n, unix.Unlink(pj(root, n)))
		}
		o.lsTypes("ls", root)
		return o
	}},
}

// xattrList records every name listxattr gives for path (not following
// a link), sorted.
func (o *obs) xattrList(what, path string) {
	buf := make([]byte, 8192)
	n, err := unix.Llistxattr(path, buf)
	if err != nil {
		o.err(what, err)
		return
	}
	var names []string
	for _, s := range splitNul(buf[:n]) {
		names = append(names, s)
	}
	sort.Strings(names)
	o.add("%s: %q", what, names)
}

func splitNul(b []byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == 0 {
			out = append(out, string(b[start:i]))
			start = i + 1
		}
	}
	return out
}

var moreXattrCases = []posixCase{
	{"xattr/namespaces", func(t *testing.T, root string) *obs {
		// What a local disk without SELinux or ACLs in use answers for
		// the names the kernel and tools ask about.
		o := &obs{}
		f := pj(root, "f")
		o.mkfile(f, []byte("x"))
		o.getxattr("get security.capability", f, "security.capability")
		o.getxattr("get security.selinux", f, "security.selinux")
		o.getxattr("get system.nfs4_acl", f, "system.nfs4_acl")
		o.err("set system.foo", unix.Setxattr(f, "system.foo", []byte("v"), 0))
		o.err("set other.foo", unix.Setxattr(f, "other.foo", []byte("v"), 0))
		o.getxattr("get other.foo", f, "other.foo")
		o.err("remove security.nothing", unix.Removexattr(f, "security.nothing"))
		o.err("remove other.foo", unix.Removexattr(f, "other.foo"))
		o.err("set user.", unix.Setxattr(f, "user.", []byte("v"), 0))
		o.err("set a name of 256 bytes", unix.Setxattr(f, "user."+string(make([]byte, 251)), []byte("v"), 0))
		o.err("set a value of 64 KiB + 1", unix.Setxattr(f, "user.big", make([]byte, 65537), 0))
		o.err("set with both flags", unix.Setxattr(f, "user.a", []byte("v"), unix.XATTR_CREATE|unix.XATTR_REPLACE))
		o.err("XATTR_CREATE on missing", unix.Setxattr(f, "user.a", []byte("v"), unix.XATTR_CREATE))
		o.err("both flags on existing", unix.Setxattr(f, "user.a", []byte("v"), unix.XATTR_CREATE|unix.XATTR_REPLACE))
		o.xattrList("list", f)
		return o
	}},
	{"xattr/posix-acl", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("x"))
		o.getxattr("get system.posix_acl_access", pj(root, "f"), "system.posix_acl_access")
		o.getxattr("get system.posix_acl_default of a dir", root, "system.posix_acl_default")
		return o
	}},
	{"xattr/security-and-trusted", func(t *testing.T, root string) *obs {
		o := &obs{}
		f := pj(root, "f")
		o.mkfile(f, []byte("x"))
		o.err("set security.test", unix.Setxattr(f, "security.test", []byte("v"), 0))
		o.err("set trusted.test", unix.Setxattr(f, "trusted.test", []byte("v"), 0))
		o.getxattr("get trusted.test", f, "trusted.test")
		o.xattrList("list", f)
		return o
	}},
	{"xattr/names-and-values", func(t *testing.T, root string) *obs {
		o := &obs{}
		f := pj(root, "f")
		o.mkfile(f, []byte("x"))
		names := []string{"user.Upper", "user.upper", "user.with space", "user.größe", "user.%41", "user.a/b:c",
			"user.org.freedesktop.trash", "user.long" + string(repeatByte('n', 240))}
		vals := [][]byte{[]byte("UPPER"), []byte("lower"), []byte(" padded "), []byte("ü\x00\xff"), []byte("%41"),
			[]byte("line\nbreak"), []byte("trailing "), repeatByte('v', 3000)}
		for i, n := range names {
			o.err("set "+n, unix.Setxattr(f, n, vals[i], 0))
		}
		for _, n := range names {
			o.getxattr("get "+n, f, n)
		}
		o.userXattrs("list", f)
		sz, err := unix.Listxattr(f, nil)
		o.n("size of the list", sz, err)
		_, err = unix.Listxattr(f, make([]byte, 5))
		o.err("list into a small buffer", err)
		v := make([]byte, 3000)
		n, err := unix.Getxattr(f, names[len(names)-1], v)
		o.data("get 3000 bytes", v[:max(n, 0)], err)
		o.err("set empty value", unix.Setxattr(f, "user.Upper", nil, 0))
		o.getxattr("get empty value", f, "user.Upper")
		sz, err = unix.Getxattr(f, "user.Upper", nil)
		o.n("size of the empty value", sz, err)
		return o
	}},
	{"xattr/kept-by-changes", func(t *testing.T, root string) *obs {
		// A file's attributes stay through chmod, rename, a rewrite of
		// its content and a rename over another file; a directory's
		// through a rename.
		o := &obs{}
		f := pj(root, "f")
		o.mkfile(f, []byte("first"))
		o.err("set", unix.Setxattr(f, "user.k", []byte("v1"), 0))
		o.err("chmod", unix.Chmod(f, 0o600))
		o.getxattr("after chmod", f, "user.k")
		o.err("rename", unix.Rename(f, pj(root, "g")))
		o.getxattr("after rename", pj(root, "g"), "user.k")
		fd := o.open("open O_TRUNC", pj(root, "g"), unix.O_WRONLY|unix.O_TRUNC, 0)
		o.write("write", fd, []byte("second"))
		o.err("fsetxattr", unix.Fsetxattr(fd, "user.fd", []byte("via fd"), 0))
		o.close("close", fd)
		o.getxattr("after a rewrite", pj(root, "g"), "user.k")
		o.getxattr("set through the fd", pj(root, "g"), "user.fd")
		o.mkfile(pj(root, "other"), []byte("other"))
		o.err("set on other", unix.Setxattr(pj(root, "other"), "user.other", []byte("o"), 0))
		o.err("rename g over other", unix.Rename(pj(root, "g"), pj(root, "other")))
		o.userXattrs("list other", pj(root, "other"))
		o.mkdir(pj(root, "d"))
		o.err("set on d", unix.Setxattr(pj(root, "d"), "user.d", []byte("dir"), 0))
		o.mkfile(pj(root, "d", "inside"), []byte("i"))
		o.err("rename d", unix.Rename(pj(root, "d"), pj(root, "e")))
		o.getxattr("d after rename", pj(root, "e"), "user.d")
		o.err("remove", unix.Removexattr(pj(root, "e"), "user.d"))
		o.userXattrs("list e", pj(root, "e"))
		o.err("set again", unix.Setxattr(pj(root, "e"), "user.d", []byte("again"), unix.XATTR_CREATE))
		o.getxattr("set again", pj(root, "e"), "user.d")
		// Unlinked while open: the descriptor still has them.
		fd = o.open("open other", pj(root, "other"), unix.O_RDWR, 0)
		o.err("unlink other", unix.Unlink(pj(root, "other")))
		o.err("fsetxattr unlinked", unix.Fsetxattr(fd, "user.late", []byte("late"), 0))
		buf := make([]byte, 64)
		n, err := unix.Fgetxattr(fd, "user.late", buf)
		o.data("fgetxattr unlinked", buf[:max(n, 0)], err)
		o.close("close", fd)
		return o
	}},
	{"xattr/special-and-symlink", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("x"))
		o.err("symlink", unix.Symlink("f", pj(root, "l")))
		o.err("mkfifo", unix.Mkfifo(pj(root, "p"), 0o644))
		for _, n := range []string{"l", "p"} {
			p := pj(root, n)
			o.err("lsetxattr "+n, unix.Lsetxattr(p, "user.a", []byte("v"), 0))
			buf := make([]byte, 64)
			_, err := unix.Lgetxattr(p, "user.a", buf)
			o.err("lgetxattr "+n, err)
			o.err("lremovexattr "+n, unix.Lremovexattr(p, "user.a"))
			o.xattrList("llistxattr "+n, p)
		}
		o.err("setxattr through the link", unix.Setxattr(pj(root, "l"), "user.a", []byte("target's"), 0))
		o.getxattr("get on the target", pj(root, "f"), "user.a")
		return o
	}},
}

func repeatByte(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

// The mount's own limit on the space of a file's attributes (GCS keeps
// 8 KiB of custom metadata per object): a local disk's differs (ext4: a
// block, tmpfs: more), so it is checked here rather than compared. An
// attribute that could never fit is E2BIG; one that does not fit beside
// the others, ENOSPC; nothing is lost either way, and the ones kept
// survive a remount with a fresh cache.
func TestXattrLimits(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{})
	f := m.path("f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(f, "user.big", repeatByte('b', 9000), 0); err != unix.E2BIG {
		t.Errorf("setxattr of 9000 bytes: %v, want E2BIG", err)
	}
	if err := unix.Setxattr(f, "user.a", repeatByte('a', 5000), 0); err != nil {
		t.Fatalf("setxattr of 5000 bytes: %v", err)
	}
	if err := unix.Setxattr(f, "user.b", repeatByte('b', 3000), 0); err != unix.ENOSPC {
		t.Errorf("setxattr of 3000 more bytes: %v, want ENOSPC", err)
	}
	if err := unix.Setxattr(f, "user.b", repeatByte('b', 1000), 0); err != nil {
		t.Errorf("setxattr of 1000 more bytes: %v", err)
	}
	// Replacing a value counts its new size only.
	if err := unix.Setxattr(f, "user.a", repeatByte('A', 5500), 0); err != nil {
		t.Errorf("replacing 5000 bytes with 5500: %v", err)
	}
	m.unmount(t)
	m = mount(t, emu, mountOpts{})
	buf := make([]byte, 8192)
	n, err := unix.Getxattr(m.path("f"), "user.a", buf)
	if err != nil || string(buf[:n]) != string(repeatByte('A', 5500)) {
		t.Errorf("after a remount user.a is %d bytes (err %v), want the 5500 set", n, err)
	}
	n, err = unix.Getxattr(m.path("f"), "user.b", buf)
	if err != nil || n != 1000 {
		t.Errorf("after a remount user.b is %d bytes (err %v), want 1000", n, err)
	}
	if _, err := os.Stat(filepath.Join(m.dir, "f")); err != nil {
		t.Error(err)
	}
}

// typesRemountCases are the remount cases of special files and extended
// attributes: what they keep must come back from the bucket.
func typesRemountCases() []remountCase {
	return []remountCase{
		{"special", func(t *testing.T, root string) *obs {
			o := &obs{}
			o.err("mkfifo", unix.Mkfifo(pj(root, "fifo"), 0o640))
			o.err("mknod char", unix.Mknod(pj(root, "chr"), unix.S_IFCHR|0o620, int(unix.Mkdev(136, 3))))
			o.err("mknod block", unix.Mknod(pj(root, "blk"), unix.S_IFBLK|0o600, int(unix.Mkdev(259, 70000))))
			o.err("mknod socket", unix.Mknod(pj(root, "sock"), unix.S_IFSOCK|0o755, 0))
			o.err("chown fifo", unix.Lchown(pj(root, "fifo"), 1234, 5678))
			o.mkdir(pj(root, "d"))
			o.err("mkfifo in d", unix.Mkfifo(pj(root, "d", "p"), 0o600))
			o.err("rename d", unix.Rename(pj(root, "d"), pj(root, "e")))
			return o
		}, func(t *testing.T, root string) *obs {
			o := &obs{}
			o.lsTypes("ls", root)
			o.lsTypes("ls e", pj(root, "e"))
			for _, n := range []string{"fifo", "chr", "blk", "sock", "e/p"} {
				o.special(n, pj(root, n))
			}
			return o
		}},
		{"xattrs", func(t *testing.T, root string) *obs {
			o := &obs{}
			o.mkfile(pj(root, "f"), []byte("x"))
			o.err("set text", unix.Setxattr(pj(root, "f"), "user.Text", []byte("kept text"), 0))
			o.err("set binary", unix.Setxattr(pj(root, "f"), "user.bin ary", []byte{0, 255, 10, 13, ' '}, 0))
			o.err("set removed", unix.Setxattr(pj(root, "f"), "user.gone", []byte("x"), 0))
			o.err("remove", unix.Removexattr(pj(root, "f"), "user.gone"))
			o.mkdir(pj(root, "d"))
			o.err("set on d", unix.Setxattr(pj(root, "d"), "user.dir", []byte("of d"), 0))
			o.mkfile(pj(root, "big"), repeatByte('b', 3<<20))
			o.err("set on big", unix.Setxattr(pj(root, "big"), "user.k", []byte("big's"), 0))
			return o
		}, func(t *testing.T, root string) *obs {
			o := &obs{}
			o.userXattrs("list f", pj(root, "f"))
			o.getxattr("get text", pj(root, "f"), "user.Text")
			o.getxattr("get binary", pj(root, "f"), "user.bin ary")
			o.getxattr("get removed", pj(root, "f"), "user.gone")
			o.userXattrs("list d", pj(root, "d"))
			o.getxattr("get d", pj(root, "d"), "user.dir")
			o.getxattr("get big", pj(root, "big"), "user.k")
			o.file("big", pj(root, "big"))
			return o
		}},
	}
}
