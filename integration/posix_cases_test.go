package integration

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
	"golang.org/x/sys/unix"
)

// The cases of the POSIX suite (see posix_test.go), one table per family
// of system calls. A case records what it sees, including the outcome of
// its own setup, so that a setup step failing on the mount shows as a
// difference rather than as a broken test.

func posixCases() []posixCase {
	var all []posixCase
	for _, family := range [][]posixCase{
		openCases, rwCases, truncateCases, statCases, unlinkCases, renameCases,
		dirCases, symlinkCases, linkCases, xattrCases, readdirCases, statfsCases,
		nameCases, mmapCases, lockCases, syncCases, specialCases, moreXattrCases, limitCases, timeCases, nlinkCases,
	} {
		all = append(all, family...)
	}
	return all
}

// pj joins root and elems.
func pj(root string, elem ...string) string { return filepath.Join(append([]string{root}, elem...)...) }

// open opens path and records the outcome; -1 if it failed.
func (o *obs) open(what, path string, flags int, mode uint32) int {
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, mode)
	o.err(what, err)
	if err != nil {
		return -1
	}
	return fd
}

// close closes fd (if open) and records the outcome.
func (o *obs) close(what string, fd int) {
	if fd >= 0 {
		o.err(what, unix.Close(fd))
	}
}

// mkfile writes a file of data and records the outcome.
func (o *obs) mkfile(path string, data []byte) {
	o.err("create "+filepath.Base(path), os.WriteFile(path, data, 0o644))
}

// mkdir makes a directory and records the outcome.
func (o *obs) mkdir(path string) {
	o.err("mkdir "+filepath.Base(path), unix.Mkdir(path, 0o755))
}

// pread records a read of n bytes at off.
func (o *obs) pread(what string, fd, n int, off int64) {
	buf := make([]byte, n)
	got, err := unix.Pread(fd, buf, off)
	if err != nil {
		o.err(what, err)
		return
	}
	o.data(what, buf[:got], nil)
}

func (o *obs) pwrite(what string, fd int, b []byte, off int64) {
	n, err := unix.Pwrite(fd, b, off)
	o.n(what, n, err)
}

func (o *obs) write(what string, fd int, b []byte) {
	n, err := unix.Write(fd, b)
	o.n(what, n, err)
}

var openCases = []posixCase{
	{"open/creat-new", func(t *testing.T, root string) *obs {
		o := &obs{}
		fd := o.open("open O_CREAT", pj(root, "f"), unix.O_CREAT|unix.O_WRONLY, 0o644)
		o.fstat("fstat", fd)
		o.close("close", fd)
		o.stat("stat", pj(root, "f"))
		o.file("content", pj(root, "f"))
		return o
	}},
	{"open/creat-existing-keeps-data", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("hello"))
		fd := o.open("open O_CREAT", pj(root, "f"), unix.O_CREAT|unix.O_WRONLY, 0o644)
		o.close("close", fd)
		o.file("content", pj(root, "f"))
		return o
	}},
	{"open/excl", func(t *testing.T, root string) *obs {
		o := &obs{}
		fd := o.open("O_EXCL new", pj(root, "f"), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
		o.write("write", fd, []byte("first"))
		o.close("close", fd)
		fd = o.open("O_EXCL existing", pj(root, "f"), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
		o.close("close", fd)
		o.mkdir(pj(root, "d"))
		fd = o.open("O_EXCL on a directory", pj(root, "d"), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
		o.close("close", fd)
		o.file("content", pj(root, "f"))
		return o
	}},
	{"open/trunc", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), bytes.Repeat([]byte("x"), 100))
		fd := o.open("O_WRONLY|O_TRUNC", pj(root, "f"), unix.O_WRONLY|unix.O_TRUNC, 0)
		o.fstat("fstat", fd)
		o.close("close", fd)
		o.stat("stat", pj(root, "f"))
		o.mkfile(pj(root, "g"), bytes.Repeat([]byte("y"), 100))
		// Linux truncates with O_RDONLY|O_TRUNC too.
		fd = o.open("O_RDONLY|O_TRUNC", pj(root, "g"), unix.O_RDONLY|unix.O_TRUNC, 0)
		o.close("close", fd)
		o.stat("stat g", pj(root, "g"))
		return o
	}},
	{"open/append", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("start"))
		fd := o.open("O_APPEND", pj(root, "f"), unix.O_WRONLY|unix.O_APPEND, 0)
		o.write("write", fd, []byte("-one"))
		_, err := unix.Seek(fd, 0, 0)
		o.err("lseek 0", err)
		o.write("write after lseek", fd, []byte("-two"))
		// On Linux, pwrite on an O_APPEND descriptor appends too.
		o.pwrite("pwrite at 0", fd, []byte("-three"), 0)
		o.close("close", fd)
		o.file("content", pj(root, "f"))
		fd = o.open("O_CREAT|O_APPEND new", pj(root, "g"), unix.O_CREAT|unix.O_RDWR|unix.O_APPEND, 0o644)
		o.write("write", fd, []byte("abc"))
		o.write("write", fd, []byte("def"))
		o.pread("pread", fd, 100, 0)
		o.close("close", fd)
		return o
	}},
	{"open/access-modes", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("data"))
		fd := o.open("O_RDONLY", pj(root, "f"), unix.O_RDONLY, 0)
		o.write("write on O_RDONLY", fd, []byte("no"))
		o.pwrite("pwrite on O_RDONLY", fd, []byte("no"), 0)
		o.err("ftruncate on O_RDONLY", unix.Ftruncate(fd, 0))
		o.close("close", fd)
		fd = o.open("O_WRONLY", pj(root, "f"), unix.O_WRONLY, 0)
		o.pread("read on O_WRONLY", fd, 4, 0)
		o.close("close", fd)
		o.file("content", pj(root, "f"))
		return o
	}},
	{"open/directory", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkdir(pj(root, "d"))
		fd := o.open("O_RDONLY on a directory", pj(root, "d"), unix.O_RDONLY, 0)
		o.pread("read on a directory", fd, 10, 0)
		o.close("close", fd)
		fd = o.open("O_WRONLY on a directory", pj(root, "d"), unix.O_WRONLY, 0)
		o.close("close", fd)
		fd = o.open("O_RDWR on a directory", pj(root, "d"), unix.O_RDWR, 0)
		o.close("close", fd)
		fd = o.open("O_CREAT on a directory", pj(root, "d"), unix.O_CREAT|unix.O_WRONLY, 0o644)
		o.close("close", fd)
		o.mkfile(pj(root, "f"), []byte("x"))
		fd = o.open("O_DIRECTORY on a file", pj(root, "f"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
		o.close("close", fd)
		return o
	}},
	{"open/missing", func(t *testing.T, root string) *obs {
		o := &obs{}
		fd := o.open("missing file", pj(root, "nofile"), unix.O_RDONLY, 0)
		o.close("close", fd)
		fd = o.open("O_CREAT in a missing parent", pj(root, "nodir", "f"), unix.O_CREAT|unix.O_WRONLY, 0o644)
		o.close("close", fd)
		o.mkfile(pj(root, "file"), []byte("x"))
		fd = o.open("O_CREAT through a file", pj(root, "file", "f"), unix.O_CREAT|unix.O_WRONLY, 0o644)
		o.close("close", fd)
		fd = o.open("open through a file", pj(root, "file", "f"), unix.O_RDONLY, 0)
		o.close("close", fd)
		o.stat("stat through a file", pj(root, "file", "f"))
		o.err("mkdir through a file", unix.Mkdir(pj(root, "file", "d"), 0o755))
		o.ls("ls", root)
		return o
	}},
	{"open/odirect", func(t *testing.T, root string) *obs {
		o := &obs{}
		// O_DIRECT wants aligned buffers: mmap'd memory is page aligned.
		buf, err := unix.Mmap(-1, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(buf)
		copy(buf, testutil.RandomBytes(8192, 7))
		fd := o.open("O_DIRECT", pj(root, "f"), unix.O_CREAT|unix.O_RDWR|unix.O_DIRECT, 0o644)
		if fd >= 0 {
			n, err := unix.Pwrite(fd, buf, 0)
			o.n("pwrite 8192 aligned", n, err)
			n, err = unix.Pwrite(fd, buf[:4096], 8192)
			o.n("pwrite 4096 aligned at 8192", n, err)
			clear(buf)
			n, err = unix.Pread(fd, buf, 4096)
			o.n("pread 8192 at 4096", n, err)
			o.data("bytes read", buf[:max(n, 0)], nil)
		}
		o.close("close", fd)
		o.stat("stat", pj(root, "f"))
		o.file("content", pj(root, "f"))
		return o
	}},
}

var rwCases = []posixCase{
	{"rw/write-read", func(t *testing.T, root string) *obs {
		o := &obs{}
		fd := o.open("create", pj(root, "f"), unix.O_CREAT|unix.O_RDWR, 0o644)
		for i := range 5 {
			o.write("write "+strconv.Itoa(i), fd, []byte(strings.Repeat(strconv.Itoa(i), 1000*(i+1))))
		}
		off, err := unix.Seek(fd, 0, 1)
		o.add("offset %d %s", off, errName(err))
		off, err = unix.Seek(fd, 0, 2)
		o.add("SEEK_END %d %s", off, errName(err))
		_, err = unix.Seek(fd, 100, 0)
		o.err("lseek 100", err)
		buf := make([]byte, 2000)
		n, err := unix.Read(fd, buf)
		o.n("read", n, err)
		o.data("bytes", buf[:max(n, 0)], nil)
		o.fstat("fstat before close", fd)
		o.close("close", fd)
		o.file("content", pj(root, "f"))
		return o
	}},
	{"rw/pread-pwrite-eof", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("0123456789"))
		fd := o.open("open", pj(root, "f"), unix.O_RDWR, 0)
		o.pread("pread at 5", fd, 100, 5)
		o.pread("pread at EOF", fd, 100, 10)
		o.pread("pread past EOF", fd, 100, 1000)
		o.pwrite("pwrite in the middle", fd, []byte("ab"), 4)
		o.pwrite("pwrite across EOF", fd, []byte("XYZ"), 9)
		o.pwrite("pwrite past EOF", fd, []byte("end"), 20)
		o.pread("pread all", fd, 100, 0)
		o.fstat("fstat", fd)
		o.close("close", fd)
		o.file("content", pj(root, "f"))
		return o
	}},
	{"rw/sparse", func(t *testing.T, root string) *obs {
		o := &obs{}
		fd := o.open("create", pj(root, "f"), unix.O_CREAT|unix.O_RDWR, 0o644)
		o.pwrite("pwrite at 3 MiB", fd, []byte("tail"), 3<<20)
		o.pwrite("pwrite at 1 MiB+1", fd, []byte("mid"), 1<<20+1)
		o.pread("pread in the first hole", fd, 16, 4096)
		o.pread("pread across the data", fd, 8, 1<<20-2)
		o.fstat("fstat", fd)
		o.close("close", fd)
		o.file("content", pj(root, "f"))
		return o
	}},
	{"rw/large", func(t *testing.T, root string) *obs {
		o := &obs{}
		data := testutil.RandomBytes(5<<20+123, 11)
		o.mkfile(pj(root, "f"), data)
		fd := o.open("open", pj(root, "f"), unix.O_RDWR, 0)
		o.pwrite("patch across a 1 MiB boundary", fd, testutil.RandomBytes(70000, 12), 2<<20-30000)
		o.pread("pread 100k at 2 MiB - 50k", fd, 100000, 2<<20-50000)
		o.close("close", fd)
		o.file("content", pj(root, "f"))
		o.stat("stat", pj(root, "f"))
		return o
	}},
	{"rw/two-handles", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("aaaaaaaaaa"))
		r := o.open("open reader", pj(root, "f"), unix.O_RDONLY, 0)
		o.pread("reader before", r, 20, 0)
		w := o.open("open writer", pj(root, "f"), unix.O_WRONLY, 0)
		o.pwrite("writer writes", w, []byte("BBB"), 3)
		o.pwrite("writer extends", w, []byte("CC"), 12)
		o.pread("reader after", r, 20, 0)
		o.fstat("reader fstat", r)
		o.close("close writer", w)
		o.pread("reader after the writer closed", r, 20, 0)
		o.close("close reader", r)
		return o
	}},
}

var truncateCases = []posixCase{
	{"truncate/path", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("0123456789"))
		o.err("truncate down to 4", unix.Truncate(pj(root, "f"), 4))
		o.file("after down", pj(root, "f"))
		o.err("truncate up to 20", unix.Truncate(pj(root, "f"), 20))
		o.file("after up", pj(root, "f"))
		o.err("truncate up to 2 MiB", unix.Truncate(pj(root, "f"), 2<<20))
		o.stat("stat", pj(root, "f"))
		o.file("after 2 MiB", pj(root, "f"))
		o.err("truncate to 0", unix.Truncate(pj(root, "f"), 0))
		o.stat("stat after 0", pj(root, "f"))
		o.err("truncate missing", unix.Truncate(pj(root, "nofile"), 0))
		o.mkdir(pj(root, "d"))
		o.err("truncate a directory", unix.Truncate(pj(root, "d"), 0))
		o.err("truncate negative", unix.Truncate(pj(root, "f"), -1))
		return o
	}},
	{"truncate/ftruncate", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("0123456789"))
		fd := o.open("open", pj(root, "f"), unix.O_RDWR, 0)
		o.err("ftruncate down to 3", unix.Ftruncate(fd, 3))
		o.fstat("fstat", fd)
		o.pread("pread", fd, 20, 0)
		o.err("ftruncate up to 8", unix.Ftruncate(fd, 8))
		o.pread("pread after up", fd, 20, 0)
		o.pwrite("pwrite at 10", fd, []byte("x"), 10)
		o.err("ftruncate down to 9", unix.Ftruncate(fd, 9))
		o.pread("pread after down", fd, 20, 0)
		o.err("ftruncate negative", unix.Ftruncate(fd, -5))
		o.close("close", fd)
		o.file("content", pj(root, "f"))
		return o
	}},
	{"truncate/seen-by-other-handle", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), bytes.Repeat([]byte("z"), 50000))
		r := o.open("open reader", pj(root, "f"), unix.O_RDONLY, 0)
		o.pread("reader", r, 10, 49990)
		o.err("truncate by path", unix.Truncate(pj(root, "f"), 100))
		o.fstat("reader fstat", r)
		o.pread("reader past the new end", r, 10, 49990)
		o.pread("reader at the end", r, 10, 95)
		o.close("close", r)
		return o
	}},
}

var statCases = []posixCase{
	{"stat/fields", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("12345"))
		o.stat("file", pj(root, "f"))
		o.mkfile(pj(root, "empty"), nil)
		o.stat("empty file", pj(root, "empty"))
		o.mkdir(pj(root, "d"))
		o.stat("dir", pj(root, "d"))
		fd := o.open("open", pj(root, "f"), unix.O_RDONLY, 0)
		o.fstat("fstat", fd)
		o.close("close", fd)
		var st unix.Stat_t
		if err := unix.Stat(pj(root, "f"), &st); err == nil {
			o.add("blksize > 0: %v", st.Blksize > 0)
			o.add("uid, gid: %d %d", st.Uid, st.Gid)
			o.add("mtime within a minute of now: %v", time.Since(time.Unix(st.Mtim.Unix())).Abs() < time.Minute)
		}
		o.stat("missing", pj(root, "nofile"))
		return o
	}},
	{"stat/mode-at-create", func(t *testing.T, root string) *obs {
		o := &obs{}
		fd := o.open("create 0600", pj(root, "f"), unix.O_CREAT|unix.O_WRONLY, 0o600)
		o.close("close", fd)
		o.stat("stat", pj(root, "f"))
		o.err("mkdir 0700", unix.Mkdir(pj(root, "d"), 0o700))
		o.stat("stat dir", pj(root, "d"))
		return o
	}},
	{"stat/chmod", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("x"))
		o.err("chmod 0600", unix.Chmod(pj(root, "f"), 0o600))
		o.stat("stat", pj(root, "f"))
		o.err("chmod 0755", unix.Chmod(pj(root, "f"), 0o755))
		o.stat("stat", pj(root, "f"))
		fd := o.open("open", pj(root, "f"), unix.O_RDONLY, 0)
		o.err("fchmod 0640", unix.Fchmod(fd, 0o640))
		o.fstat("fstat", fd)
		o.close("close", fd)
		o.err("chmod missing", unix.Chmod(pj(root, "nofile"), 0o600))
		return o
	}},
	{"stat/chmod-dir", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkdir(pj(root, "d"))
		o.err("chmod 0700", unix.Chmod(pj(root, "d"), 0o700))
		o.stat("stat", pj(root, "d"))
		return o
	}},
	{"stat/chown", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("x"))
		o.err("chown 1234:5678", unix.Chown(pj(root, "f"), 1234, 5678))
		var st unix.Stat_t
		o.err("stat", unix.Stat(pj(root, "f"), &st))
		o.add("owner %d:%d", st.Uid, st.Gid)
		o.err("chown -1:4321", unix.Chown(pj(root, "f"), -1, 4321))
		o.err("stat", unix.Stat(pj(root, "f"), &st))
		o.add("owner %d:%d", st.Uid, st.Gid)
		return o
	}},
	{"stat/utimes", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("x"))
		at := unix.NsecToTimespec(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC).UnixNano())
		mt := unix.NsecToTimespec(time.Date(2002, 3, 4, 5, 6, 7, 0, time.UTC).UnixNano())
		o.err("utimes (whole seconds)", unix.UtimesNano(pj(root, "f"), []unix.Timespec{at, mt}))
		var st unix.Stat_t
		o.err("stat", unix.Stat(pj(root, "f"), &st))
		o.add("mtime %d.%09d", st.Mtim.Sec, st.Mtim.Nsec)
		return o
	}},
	{"stat/utimensat-nanoseconds", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("x"))
		mt := unix.NsecToTimespec(time.Date(2003, 4, 5, 6, 7, 8, 123456789, time.UTC).UnixNano())
		omit := unix.Timespec{Nsec: unix.UTIME_OMIT}
		o.err("utimensat (atime omitted)", unix.UtimesNanoAt(unix.AT_FDCWD, pj(root, "f"), []unix.Timespec{omit, mt}, 0))
		var st unix.Stat_t
		o.err("stat", unix.Stat(pj(root, "f"), &st))
		o.add("mtime %d.%09d", st.Mtim.Sec, st.Mtim.Nsec)
		return o
	}},
	{"stat/mtime-follows-write", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("x"))
		old := unix.NsecToTimespec(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
		o.err("utimes to 2001", unix.UtimesNano(pj(root, "f"), []unix.Timespec{old, old}))
		fd := o.open("open", pj(root, "f"), unix.O_WRONLY, 0)
		o.pwrite("pwrite", fd, []byte("y"), 0)
		o.close("close", fd)
		var st unix.Stat_t
		o.err("stat", unix.Stat(pj(root, "f"), &st))
		o.add("mtime after the write is recent: %v", time.Since(time.Unix(st.Mtim.Unix())).Abs() < time.Minute)
		return o
	}},
}

var unlinkCases = []posixCase{
	{"unlink/basic", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("x"))
		o.err("unlink", unix.Unlink(pj(root, "f")))
		o.stat("stat", pj(root, "f"))
		o.err("unlink again", unix.Unlink(pj(root, "f")))
		o.mkdir(pj(root, "d"))
		o.err("unlink a directory", unix.Unlink(pj(root, "d")))
		o.mkfile(pj(root, "g"), []byte("x"))
		o.err("unlink through a file", unix.Unlink(pj(root, "g", "x")))
		o.err("unlink in a missing dir", unix.Unlink(pj(root, "nodir", "x")))
		o.ls("ls", root)
		return o
	}},
	{"unlink/open-read", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("still here"))
		fd := o.open("open", pj(root, "f"), unix.O_RDONLY, 0)
		o.err("unlink", unix.Unlink(pj(root, "f")))
		o.pread("read via the fd", fd, 100, 0)
		var st unix.Stat_t
		o.err("fstat", unix.Fstat(fd, &st))
		o.add("size %d", st.Size)
		o.close("close", fd)
		o.ls("ls", root)
		return o
	}},
	{"unlink/open-fstat-nlink", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("x"))
		fd := o.open("open", pj(root, "f"), unix.O_RDONLY, 0)
		o.err("unlink", unix.Unlink(pj(root, "f")))
		o.fstat("fstat", fd)
		o.close("close", fd)
		return o
	}},
	{"unlink/open-write", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("0123456789"))
		fd := o.open("open", pj(root, "f"), unix.O_RDWR, 0)
		o.err("unlink", unix.Unlink(pj(root, "f")))
		o.pwrite("pwrite via the fd", fd, []byte("abc"), 2)
		o.pwrite("extend via the fd", fd, []byte("end"), 20)
		o.pread("read back via the fd", fd, 100, 0)
		var st unix.Stat_t
		o.err("fstat", unix.Fstat(fd, &st))
		o.add("size %d", st.Size)
		o.close("close", fd)
		o.ls("ls", root)
		return o
	}},
	{"unlink/open-then-recreate", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("old"))
		fd := o.open("open", pj(root, "f"), unix.O_RDONLY, 0)
		o.err("unlink", unix.Unlink(pj(root, "f")))
		o.mkfile(pj(root, "f"), []byte("new content"))
		o.pread("old fd", fd, 100, 0)
		o.file("new name", pj(root, "f"))
		o.close("close", fd)
		return o
	}},
}

var renameCases = []posixCase{
	{"rename/file", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "a"), []byte("aaa"))
		o.mkfile(pj(root, "b"), []byte("bbb"))
		o.err("rename to a new name", unix.Rename(pj(root, "a"), pj(root, "c")))
		o.err("rename over a file", unix.Rename(pj(root, "c"), pj(root, "b")))
		o.file("b", pj(root, "b"))
		o.err("rename over itself", unix.Rename(pj(root, "b"), pj(root, "b")))
		o.file("b", pj(root, "b"))
		o.err("rename missing", unix.Rename(pj(root, "nofile"), pj(root, "x")))
		o.err("rename into a missing dir", unix.Rename(pj(root, "b"), pj(root, "nodir", "x")))
		o.err("rename through a file", unix.Rename(pj(root, "b"), pj(root, "b", "x")))
		o.mkdir(pj(root, "d"))
		o.err("rename into a dir", unix.Rename(pj(root, "b"), pj(root, "d", "b")))
		o.tree("tree", root)
		return o
	}},
	{"rename/file-dir-conflicts", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("f"))
		o.mkdir(pj(root, "d"))
		o.mkdir(pj(root, "full"))
		o.mkfile(pj(root, "full", "x"), []byte("x"))
		o.err("file over dir", unix.Rename(pj(root, "f"), pj(root, "d")))
		o.err("dir over file", unix.Rename(pj(root, "d"), pj(root, "f")))
		o.err("dir over non-empty dir", unix.Rename(pj(root, "d"), pj(root, "full")))
		o.err("dir into its own subdir", unix.Rename(pj(root, "full"), pj(root, "full", "sub")))
		o.tree("tree", root)
		return o
	}},
	{"rename/dir-over-empty-dir", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkdir(pj(root, "a"))
		o.mkfile(pj(root, "a", "x"), []byte("x"))
		o.mkdir(pj(root, "empty"))
		o.err("dir over empty dir", unix.Rename(pj(root, "a"), pj(root, "empty")))
		o.tree("tree", root)
		return o
	}},
	{"rename/dir-into-own-subdir", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkdir(pj(root, "a"))
		o.mkdir(pj(root, "a", "b"))
		o.err("a into a/b/a", unix.Rename(pj(root, "a"), pj(root, "a", "b", "a")))
		o.err("a over a/b", unix.Rename(pj(root, "a"), pj(root, "a", "b")))
		o.tree("tree", root)
		return o
	}},
	{"rename/noreplace", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "a"), []byte("a"))
		o.mkfile(pj(root, "b"), []byte("b"))
		o.err("RENAME_NOREPLACE over a file", unix.Renameat2(unix.AT_FDCWD, pj(root, "a"), unix.AT_FDCWD, pj(root, "b"), unix.RENAME_NOREPLACE))
		o.err("RENAME_NOREPLACE to a new name", unix.Renameat2(unix.AT_FDCWD, pj(root, "a"), unix.AT_FDCWD, pj(root, "c"), unix.RENAME_NOREPLACE))
		o.tree("tree", root)
		return o
	}},
	{"rename/exchange", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "a"), []byte("content a"))
		o.mkfile(pj(root, "b"), []byte("content b"))
		o.err("RENAME_EXCHANGE", unix.Renameat2(unix.AT_FDCWD, pj(root, "a"), unix.AT_FDCWD, pj(root, "b"), unix.RENAME_EXCHANGE))
		o.file("a", pj(root, "a"))
		o.file("b", pj(root, "b"))
		o.err("RENAME_EXCHANGE with a missing name", unix.Renameat2(unix.AT_FDCWD, pj(root, "a"), unix.AT_FDCWD, pj(root, "c"), unix.RENAME_EXCHANGE))
		o.err("RENAME_EXCHANGE from a missing name", unix.Renameat2(unix.AT_FDCWD, pj(root, "c"), unix.AT_FDCWD, pj(root, "a"), unix.RENAME_EXCHANGE))
		o.err("RENAME_EXCHANGE with RENAME_NOREPLACE", unix.Renameat2(unix.AT_FDCWD, pj(root, "a"), unix.AT_FDCWD, pj(root, "b"), unix.RENAME_EXCHANGE|unix.RENAME_NOREPLACE))
		return o
	}},
	{"rename/exchange-open-and-dirty", func(t *testing.T, root string) *obs {
		// Open descriptors follow their file to its new name; a file not
		// yet uploaded and a symbolic link swap too.
		o := &obs{}
		o.mkfile(pj(root, "a"), []byte("content a"))
		o.err("symlink", os.Symlink("target", pj(root, "l")))
		fd := o.open("open a", pj(root, "a"), unix.O_RDWR, 0)
		o.err("RENAME_EXCHANGE a l", unix.Renameat2(unix.AT_FDCWD, pj(root, "a"), unix.AT_FDCWD, pj(root, "l"), unix.RENAME_EXCHANGE))
		o.pwrite("write via the fd", fd, []byte("CONTENT"), 0)
		o.close("close", fd)
		o.tree("tree", root)
		return o
	}},
	{"rename/exchange-dirs", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkdir(pj(root, "d"))
		o.mkfile(pj(root, "d", "x"), []byte("x"))
		o.mkdir(pj(root, "e"))
		o.err("RENAME_EXCHANGE", unix.Renameat2(unix.AT_FDCWD, pj(root, "d"), unix.AT_FDCWD, pj(root, "e"), unix.RENAME_EXCHANGE))
		o.tree("tree", root)
		return o
	}},
	{"rename/exchange-file-and-dir", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("file"))
		o.mkdir(pj(root, "d"))
		o.mkfile(pj(root, "d", "x"), []byte("x"))
		o.err("RENAME_EXCHANGE", unix.Renameat2(unix.AT_FDCWD, pj(root, "f"), unix.AT_FDCWD, pj(root, "d"), unix.RENAME_EXCHANGE))
		o.tree("tree", root)
		return o
	}},
	{"rename/open-fd", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "a"), []byte("0123456789"))
		fd := o.open("open", pj(root, "a"), unix.O_RDWR, 0)
		o.err("rename", unix.Rename(pj(root, "a"), pj(root, "b")))
		o.pread("read via the fd", fd, 100, 0)
		o.pwrite("write via the fd", fd, []byte("XY"), 3)
		o.pread("read back via the fd", fd, 100, 0)
		o.close("close", fd)
		o.file("new name", pj(root, "b"))
		o.stat("old name", pj(root, "a"))
		return o
	}},
	{"rename/over-open-target", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "new"), []byte("new content"))
		o.mkfile(pj(root, "target"), []byte("old content"))
		fd := o.open("open target", pj(root, "target"), unix.O_RDONLY, 0)
		o.err("rename new over target", unix.Rename(pj(root, "new"), pj(root, "target")))
		o.pread("old fd", fd, 100, 0)
		o.file("target", pj(root, "target"))
		o.close("close", fd)
		return o
	}},
	{"rename/dir-with-contents", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkdir(pj(root, "src"))
		o.mkdir(pj(root, "src", "sub"))
		o.mkdir(pj(root, "src", "sub", "deeper"))
		o.mkdir(pj(root, "src", "empty"))
		o.mkfile(pj(root, "src", "top"), []byte("top"))
		o.mkfile(pj(root, "src", "sub", "mid"), testutil.RandomBytes(300000, 3))
		o.mkfile(pj(root, "src", "sub", "deeper", "low"), []byte("low"))
		o.mkdir(pj(root, "dst"))
		o.err("rename src dst/moved", unix.Rename(pj(root, "src"), pj(root, "dst", "moved")))
		o.tree("tree at once", root)
		o.stat("old name", pj(root, "src"))
		o.file("a file by its new path", pj(root, "dst", "moved", "sub", "deeper", "low"))
		o.mkfile(pj(root, "dst", "moved", "sub", "added"), []byte("added"))
		o.err("rename back", unix.Rename(pj(root, "dst", "moved"), pj(root, "src")))
		o.tree("tree after renaming back", root)
		return o
	}},
	{"rename/empty-dir", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkdir(pj(root, "a"))
		o.err("rename", unix.Rename(pj(root, "a"), pj(root, "b")))
		o.ls("ls", root)
		o.mkfile(pj(root, "b", "x"), []byte("x"))
		o.tree("tree", root)
		return o
	}},
	{"rename/file-across-dirs", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkdir(pj(root, "a"))
		o.mkdir(pj(root, "b"))
		o.mkfile(pj(root, "a", "f"), []byte("moving"))
		o.err("rename a/f b/g", unix.Rename(pj(root, "a", "f"), pj(root, "b", "g")))
		o.tree("tree", root)
		o.err("rmdir a, now empty", unix.Rmdir(pj(root, "a")))
		o.ls("ls", root)
		return o
	}},
}

var dirCases = []posixCase{
	{"dir/mkdir", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkdir(pj(root, "d"))
		o.err("mkdir existing", unix.Mkdir(pj(root, "d"), 0o755))
		o.mkfile(pj(root, "f"), []byte("x"))
		o.err("mkdir over a file", unix.Mkdir(pj(root, "f"), 0o755))
		o.err("mkdir in a missing parent", unix.Mkdir(pj(root, "nodir", "d"), 0o755))
		o.err("mkdir through a file", unix.Mkdir(pj(root, "f", "d"), 0o755))
		o.err("mkdir nested", unix.Mkdir(pj(root, "d", "e"), 0o755))
		o.stat("stat", pj(root, "d", "e"))
		o.ls("ls", root)
		return o
	}},
	{"dir/rmdir", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkdir(pj(root, "d"))
		o.mkdir(pj(root, "d", "e"))
		o.mkfile(pj(root, "d", "e", "f"), []byte("x"))
		o.err("rmdir non-empty", unix.Rmdir(pj(root, "d")))
		o.err("rmdir a file", unix.Rmdir(pj(root, "d", "e", "f")))
		o.err("rmdir missing", unix.Rmdir(pj(root, "nodir")))
		o.err("rmdir through a file", unix.Rmdir(pj(root, "d", "e", "f", "x")))
		o.err("unlink f", unix.Unlink(pj(root, "d", "e", "f")))
		o.err("rmdir e, emptied", unix.Rmdir(pj(root, "d", "e")))
		o.err("rmdir d, emptied", unix.Rmdir(pj(root, "d")))
		o.stat("stat d", pj(root, "d"))
		o.ls("ls", root)
		o.mkdir(pj(root, "d"))
		o.ls("ls d, made again", pj(root, "d"))
		return o
	}},
	{"dir/rmdir-dot", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkdir(pj(root, "d"))
		o.err("rmdir d/.", unix.Rmdir(pj(root, "d")+"/."))
		o.err("rmdir d/..", unix.Rmdir(pj(root, "d")+"/.."))
		o.ls("ls", root)
		return o
	}},
}

var symlinkCases = []posixCase{
	{"symlink/relative", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "target"), []byte("through the link"))
		o.err("symlink", unix.Symlink("target", pj(root, "link")))
		o.stat("lstat", pj(root, "link"))
		buf := make([]byte, 256)
		n, err := unix.Readlink(pj(root, "link"), buf)
		o.data("readlink", buf[:max(n, 0)], err)
		o.file("read through", pj(root, "link"))
		var st unix.Stat_t
		o.err("stat through", unix.Stat(pj(root, "link"), &st))
		o.add("size through %d", st.Size)
		o.err("symlink over an existing name", unix.Symlink("x", pj(root, "target")))
		o.ls("ls", root)
		return o
	}},
	{"symlink/absolute", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "target"), []byte("abs"))
		o.err("symlink", unix.Symlink(pj(root, "target"), pj(root, "link")))
		target, err := os.Readlink(pj(root, "link"))
		o.err("readlink", err)
		o.add("target is the absolute path: %v", target == pj(root, "target"))
		o.file("read through", pj(root, "link"))
		return o
	}},
	{"symlink/dangling", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.err("symlink", unix.Symlink("nowhere/nothing", pj(root, "link")))
		o.stat("lstat", pj(root, "link"))
		var st unix.Stat_t
		o.err("stat through", unix.Stat(pj(root, "link"), &st))
		target, err := os.Readlink(pj(root, "link"))
		o.data("readlink", []byte(target), err)
		o.err("unlink", unix.Unlink(pj(root, "link")))
		o.ls("ls", root)
		return o
	}},
	{"symlink/to-dir", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkdir(pj(root, "d"))
		o.mkfile(pj(root, "d", "x"), []byte("x"))
		o.err("symlink", unix.Symlink("d", pj(root, "ld")))
		o.ls("ls through", pj(root, "ld"))
		o.file("read through", pj(root, "ld", "x"))
		o.err("rmdir the link", unix.Rmdir(pj(root, "ld")))
		o.err("unlink the link", unix.Unlink(pj(root, "ld")))
		o.tree("tree", root)
		return o
	}},
	{"symlink/renamed-then-lchown", func(t *testing.T, root string) *obs {
		// A link not yet uploaded, renamed onto itself (the kernel looks
		// the name up again and must find the same inode), then away,
		// then changed by its new name (a replayed model-test failure).
		o := &obs{}
		o.err("symlink", unix.Symlink("a0", pj(root, "f0")))
		var before, after unix.Stat_t
		o.err("lstat", unix.Lstat(pj(root, "f0"), &before))
		o.err("rename onto itself", unix.Rename(pj(root, "f0"), pj(root, "f0")))
		o.err("rename away", unix.Rename(pj(root, "f0"), pj(root, "b0")))
		o.err("lchown the new name", unix.Lchown(pj(root, "b0"), 1000, 65534))
		o.owner("owner", pj(root, "b0"))
		o.err("lstat the new name", unix.Lstat(pj(root, "b0"), &after))
		o.add("the same inode: %v", before.Ino == after.Ino)
		target, err := os.Readlink(pj(root, "b0"))
		o.data("readlink", []byte(target), err)
		o.ls("ls", root)
		return o
	}},
	{"symlink/readlink-on-file", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("x"))
		buf := make([]byte, 64)
		_, err := unix.Readlink(pj(root, "f"), buf)
		o.err("readlink of a file", err)
		_, err = unix.Readlink(pj(root, "nofile"), buf)
		o.err("readlink missing", err)
		return o
	}},
}

var linkCases = []posixCase{
	{"link/hard", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "a"), []byte("shared"))
		o.err("link a b", unix.Link(pj(root, "a"), pj(root, "b")))
		o.stat("a", pj(root, "a"))
		o.stat("b", pj(root, "b"))
		var sa, sb unix.Stat_t
		unix.Stat(pj(root, "a"), &sa)
		unix.Stat(pj(root, "b"), &sb)
		o.add("same inode: %v", sa.Ino == sb.Ino)
		fd := o.open("open a", pj(root, "a"), unix.O_WRONLY, 0)
		o.pwrite("write via a", fd, []byte("SH"), 0)
		o.close("close", fd)
		o.file("b after a write to a", pj(root, "b"))
		o.err("unlink a", unix.Unlink(pj(root, "a")))
		o.stat("b", pj(root, "b"))
		o.file("b", pj(root, "b"))
		return o
	}},
	{"link/errors", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "a"), []byte("a"))
		o.mkfile(pj(root, "b"), []byte("b"))
		o.mkdir(pj(root, "d"))
		o.err("link over an existing name", unix.Link(pj(root, "a"), pj(root, "b")))
		o.err("link a directory", unix.Link(pj(root, "d"), pj(root, "d2")))
		o.err("link missing", unix.Link(pj(root, "nofile"), pj(root, "c")))
		o.ls("ls", root)
		return o
	}},
}

// userXattrs lists the user.* names of path, sorted (other namespaces,
// such as security.*, are the file system's own).
func (o *obs) userXattrs(what, path string) {
	buf := make([]byte, 4096)
	n, err := unix.Listxattr(path, buf)
	if err != nil {
		o.err(what, err)
		return
	}
	var names []string
	for _, s := range strings.Split(string(buf[:n]), "\x00") {
		if strings.HasPrefix(s, "user.") {
			names = append(names, s)
		}
	}
	sort.Strings(names)
	o.add("%s: %q", what, names)
}

func (o *obs) getxattr(what, path, name string) {
	buf := make([]byte, 1024)
	n, err := unix.Getxattr(path, name, buf)
	o.data(what, buf[:max(n, 0)], err)
}

var xattrCases = []posixCase{
	{"xattr/user", func(t *testing.T, root string) *obs {
		o := &obs{}
		f := pj(root, "f")
		o.mkfile(f, []byte("x"))
		o.err("set user.a", unix.Setxattr(f, "user.a", []byte("value a"), 0))
		o.err("set user.b (empty)", unix.Setxattr(f, "user.b", nil, 0))
		o.getxattr("get user.a", f, "user.a")
		o.getxattr("get user.b", f, "user.b")
		o.getxattr("get missing", f, "user.nothing")
		sz, err := unix.Getxattr(f, "user.a", nil)
		o.n("size of user.a", sz, err)
		_, err = unix.Getxattr(f, "user.a", make([]byte, 2))
		o.err("get into a small buffer", err)
		o.userXattrs("list", f)
		o.err("XATTR_CREATE on existing", unix.Setxattr(f, "user.a", []byte("v"), unix.XATTR_CREATE))
		o.err("XATTR_REPLACE on missing", unix.Setxattr(f, "user.c", []byte("v"), unix.XATTR_REPLACE))
		o.err("XATTR_REPLACE on existing", unix.Setxattr(f, "user.a", []byte("replaced"), unix.XATTR_REPLACE))
		o.getxattr("get user.a", f, "user.a")
		o.err("remove user.b", unix.Removexattr(f, "user.b"))
		o.err("remove missing", unix.Removexattr(f, "user.b"))
		o.userXattrs("list", f)
		return o
	}},
	{"xattr/dir-and-binary", func(t *testing.T, root string) *obs {
		o := &obs{}
		d := pj(root, "d")
		o.mkdir(d)
		val := []byte{0, 1, 2, 255, 254, 0}
		o.err("set on a directory", unix.Setxattr(d, "user.bin", val, 0))
		o.getxattr("get", d, "user.bin")
		o.userXattrs("list", d)
		return o
	}},
}

// dirents reads the names of the open directory fd with getdents(2),
// "." and ".." included.
func dirents(fd int) ([]string, error) {
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		for b := buf[:n]; len(b) > 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			names = append(names, string(name))
			b = b[reclen:]
		}
	}
	sort.Strings(names)
	return names, nil
}

var readdirCases = []posixCase{
	{"readdir/contents", func(t *testing.T, root string) *obs {
		o := &obs{}
		for _, n := range []string{"b", "a", "c.txt"} {
			o.mkfile(pj(root, n), []byte(n))
		}
		o.mkdir(pj(root, "dir"))
		o.mkfile(pj(root, "dir", "inner"), nil)
		o.ls("ls", root)
		fd := o.open("open dir", root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		names, err := dirents(fd)
		o.add("getdents: %s %q", errName(err), names)
		o.close("close", fd)
		return o
	}},
	{"readdir/after-changes", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "a"), nil)
		o.mkfile(pj(root, "b"), nil)
		o.ls("ls 1", root)
		o.mkfile(pj(root, "c"), nil)
		o.err("unlink a", unix.Unlink(pj(root, "a")))
		o.ls("ls 2", root)
		o.err("rename b e", unix.Rename(pj(root, "b"), pj(root, "e")))
		o.mkdir(pj(root, "d"))
		o.ls("ls 3", root)
		o.err("rmdir d", unix.Rmdir(pj(root, "d")))
		o.err("unlink c", unix.Unlink(pj(root, "c")))
		o.ls("ls 4", root)
		return o
	}},
	{"readdir/rewind", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "a"), nil)
		fd := o.open("open dir", root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		names, err := dirents(fd)
		o.add("getdents: %s %q", errName(err), names)
		o.mkfile(pj(root, "b"), nil)
		_, err = unix.Seek(fd, 0, 0)
		o.err("rewind", err)
		names, err = dirents(fd)
		o.add("getdents after rewind: %s %q", errName(err), names)
		o.close("close", fd)
		return o
	}},
	{"readdir/many", func(t *testing.T, root string) *obs {
		o := &obs{}
		var failed int
		for i := range 500 {
			if err := os.WriteFile(pj(root, "file-"+strconv.Itoa(i)), nil, 0o644); err != nil {
				failed++
			}
		}
		o.add("creates failed: %d", failed)
		des, err := os.ReadDir(root)
		o.add("readdir: %s, %d names", errName(err), len(des))
		return o
	}},
}

var statfsCases = []posixCase{
	{"statfs/sane", func(t *testing.T, root string) *obs {
		o := &obs{}
		var st unix.Statfs_t
		o.err("statfs", unix.Statfs(root, &st))
		o.add("bsize > 0: %v", st.Bsize > 0)
		o.add("blocks >= bfree >= bavail: %v", st.Blocks >= st.Bfree && st.Bfree >= st.Bavail)
		o.add("some room: %v", st.Bavail > 0)
		o.add("files >= ffree: %v", st.Files >= st.Ffree)
		o.add("namelen %d", st.Namelen)
		o.mkfile(pj(root, "f"), nil)
		fd := o.open("open", pj(root, "f"), unix.O_RDONLY, 0)
		o.err("fstatfs", unix.Fstatfs(fd, &st))
		o.close("close", fd)
		return o
	}},
}

var nameCases = []posixCase{
	{"names/255-bytes", func(t *testing.T, root string) *obs {
		o := &obs{}
		n255 := strings.Repeat("n", 255)
		u255 := strings.Repeat("é", 127) + "x" // 255 bytes, 128 characters
		n256 := strings.Repeat("n", 256)
		o.mkfile(pj(root, n255), []byte("long"))
		o.stat("stat 255", pj(root, n255))
		o.mkfile(pj(root, u255), []byte("long unicode"))
		o.file("read 255 unicode", pj(root, u255))
		o.err("mkdir 255", unix.Mkdir(pj(root, "d"+n255[1:]), 0o755))
		o.err("rename to 255", unix.Rename(pj(root, n255), pj(root, "m"+n255[1:])))
		fd := o.open("create 256", pj(root, n256), unix.O_CREAT|unix.O_WRONLY, 0o644)
		o.close("close", fd)
		o.err("mkdir 256", unix.Mkdir(pj(root, n256), 0o755))
		o.stat("stat 256", pj(root, n256))
		o.err("rename to 256", unix.Rename(pj(root, u255), pj(root, n256)))
		o.ls("ls", root)
		return o
	}},
	{"names/deep-30-levels", func(t *testing.T, root string) *obs {
		o := &obs{}
		p := root
		failed := 0
		for i := range 30 {
			p = filepath.Join(p, "lvl"+strconv.Itoa(i))
			if err := unix.Mkdir(p, 0o755); err != nil {
				failed++
			}
		}
		o.add("mkdirs failed: %d", failed)
		o.mkfile(pj(p, "bottom"), []byte("deep"))
		o.file("read", pj(p, "bottom"))
		o.stat("stat", pj(p, "bottom"))
		o.tree("tree", root)
		o.err("unlink", unix.Unlink(pj(p, "bottom")))
		failed = 0
		for range 30 {
			if err := unix.Rmdir(p); err != nil {
				failed++
			}
			p = filepath.Dir(p)
		}
		o.add("rmdirs failed: %d", failed)
		o.ls("ls", root)
		return o
	}},
	{"names/path-over-1024-bytes", func(t *testing.T, root string) *obs {
		// GCS object names are at most 1024 bytes; a local path can be
		// 4096.
		o := &obs{}
		p := root
		seg := strings.Repeat("s", 200)
		for range 6 {
			p = filepath.Join(p, seg)
			o.err("mkdir", unix.Mkdir(p, 0o755))
		}
		o.mkfile(pj(p, "f"), []byte("far down"))
		o.file("read", pj(p, "f"))
		return o
	}},
	{"names/unicode", func(t *testing.T, root string) *obs {
		o := &obs{}
		names := []string{"café", "cafe\u0301", "日本語", "שלום", "emoji-📁", "Ωmega", "ß", "SS"}
		for _, n := range names {
			o.mkfile(pj(root, n), []byte(n))
		}
		o.ls("ls", root)
		for _, n := range names {
			o.file("read "+n, pj(root, n))
		}
		return o
	}},
	{"names/special-characters", func(t *testing.T, root string) *obs {
		o := &obs{}
		names := []string{"a b", "100%", "#hash", "q?x", "star*", `back\slash`, "tab\tname", "colon:x", "semi;x", `quote'"`, "~tilde", "-dash", "brackets[1]", "amp&x", "plus+x", "=eq", "...dots", " leading space"}
		for _, n := range names {
			o.mkfile(pj(root, n), []byte(n))
		}
		o.ls("ls", root)
		for _, n := range names {
			o.file("read "+n, pj(root, n))
		}
		return o
	}},
	{"names/newline", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "new\nline"), []byte("nl"))
		o.mkfile(pj(root, "carriage\rreturn"), []byte("cr"))
		o.ls("ls", root)
		return o
	}},
	{"names/dot-names", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, ".hidden"), []byte("h"))
		o.mkfile(pj(root, "..double"), []byte("d"))
		o.mkdir(pj(root, ".git"))
		o.ls("ls", root)
		return o
	}},
}

var mmapCases = []posixCase{
	{"mmap/shared-write", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), bytes.Repeat([]byte("."), 10000))
		fd := o.open("open", pj(root, "f"), unix.O_RDWR, 0)
		if fd < 0 {
			return o
		}
		m, err := unix.Mmap(fd, 0, 10000, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		o.err("mmap MAP_SHARED", err)
		if err == nil {
			copy(m[10:], "written through the map")
			copy(m[9000:], "near the end")
			o.err("msync", unix.Msync(m, unix.MS_SYNC))
			o.pread("pread while mapped", fd, 30, 5)
			o.err("munmap", unix.Munmap(m))
		}
		o.close("close", fd)
		o.file("content", pj(root, "f"))
		return o
	}},
	{"mmap/shared-write-after-extend", func(t *testing.T, root string) *obs {
		o := &obs{}
		fd := o.open("create", pj(root, "f"), unix.O_CREAT|unix.O_RDWR, 0o644)
		if fd < 0 {
			return o
		}
		o.err("ftruncate 3 pages", unix.Ftruncate(fd, 3*4096))
		m, err := unix.Mmap(fd, 0, 3*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		o.err("mmap", err)
		if err == nil {
			for i := range m {
				m[i] = byte(i % 251)
			}
			o.err("munmap without msync", unix.Munmap(m))
		}
		o.close("close", fd)
		o.file("content", pj(root, "f"))
		return o
	}},
	{"mmap/sees-writes", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), bytes.Repeat([]byte("a"), 8192))
		fd := o.open("open", pj(root, "f"), unix.O_RDWR, 0)
		if fd < 0 {
			return o
		}
		m, err := unix.Mmap(fd, 0, 8192, unix.PROT_READ, unix.MAP_SHARED)
		o.err("mmap read-only", err)
		o.pwrite("pwrite", fd, []byte("bbbb"), 100)
		if err == nil {
			o.data("map after pwrite", bytes.Clone(m[98:106]), nil)
			o.err("munmap", unix.Munmap(m))
		}
		o.close("close", fd)
		return o
	}},
}

// lockHelperEnv makes the test binary a helper process that tries one lock
// on a file and prints the outcome (see init below): locks belong to
// processes, so a conflict needs a second one.
const lockHelperEnv = "BUCKETFS_POSIX_LOCK_HELPER"

func init() {
	kind := os.Getenv(lockHelperEnv)
	if kind == "" {
		return
	}
	os.Stdout.WriteString(tryLock(kind, os.Getenv(lockHelperEnv+"_PATH")) + "\n")
	os.Exit(0)
}

// tryLock opens path and tries a lock of kind without waiting.
func tryLock(kind, path string) string {
	fd, err := unix.Open(path, unix.O_RDWR, 0)
	if err != nil {
		return "open: " + errName(err)
	}
	defer unix.Close(fd)
	switch kind {
	case "flock":
		return "flock LOCK_EX|LOCK_NB: " + errName(unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB))
	case "fcntl":
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
		return "F_SETLK F_WRLCK: " + errName(unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &lk))
	case "getlk":
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
		err := unix.FcntlFlock(uintptr(fd), unix.F_GETLK, &lk)
		return "F_GETLK: " + errName(err) + " conflicting type " + map[int16]string{unix.F_RDLCK: "F_RDLCK", unix.F_WRLCK: "F_WRLCK", unix.F_UNLCK: "F_UNLCK"}[lk.Type] +
			" held by the parent: " + strconv.FormatBool(int(lk.Pid) == os.Getppid())
	}
	return "unknown kind " + kind
}

// lockInChild runs tryLock in another process.
func lockInChild(t *testing.T, kind, path string) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+kind, lockHelperEnv+"_PATH="+path)
	cmd.WaitDelay = 10 * time.Second
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.Output()
	if err != nil {
		return "helper: " + errName(err)
	}
	return strings.TrimSpace(string(out))
}

var lockCases = []posixCase{
	{"lock/flock-two-fds", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("x"))
		a := o.open("open a", pj(root, "f"), unix.O_RDWR, 0)
		b := o.open("open b", pj(root, "f"), unix.O_RDWR, 0)
		o.err("a LOCK_EX", unix.Flock(a, unix.LOCK_EX))
		o.err("b LOCK_EX|LOCK_NB", unix.Flock(b, unix.LOCK_EX|unix.LOCK_NB))
		o.err("b LOCK_SH|LOCK_NB", unix.Flock(b, unix.LOCK_SH|unix.LOCK_NB))
		o.err("a LOCK_UN", unix.Flock(a, unix.LOCK_UN))
		o.err("b LOCK_EX|LOCK_NB", unix.Flock(b, unix.LOCK_EX|unix.LOCK_NB))
		o.err("b LOCK_UN", unix.Flock(b, unix.LOCK_UN))
		o.err("a LOCK_SH", unix.Flock(a, unix.LOCK_SH))
		o.err("b LOCK_SH|LOCK_NB", unix.Flock(b, unix.LOCK_SH|unix.LOCK_NB))
		o.close("close a", a)
		o.close("close b", b)
		return o
	}},
	{"lock/flock-two-processes", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("x"))
		a := o.open("open", pj(root, "f"), unix.O_RDWR, 0)
		o.err("LOCK_EX", unix.Flock(a, unix.LOCK_EX))
		o.add("other process: %s", lockInChild(t, "flock", pj(root, "f")))
		o.err("LOCK_UN", unix.Flock(a, unix.LOCK_UN))
		o.add("other process after unlock: %s", lockInChild(t, "flock", pj(root, "f")))
		o.close("close", a)
		return o
	}},
	{"lock/fcntl-two-processes", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("x"))
		a := o.open("open", pj(root, "f"), unix.O_RDWR, 0)
		lk := unix.Flock_t{Type: unix.F_WRLCK}
		o.err("F_SETLK F_WRLCK", unix.FcntlFlock(uintptr(a), unix.F_SETLK, &lk))
		o.add("other process: %s", lockInChild(t, "fcntl", pj(root, "f")))
		o.add("other process: %s", lockInChild(t, "getlk", pj(root, "f")))
		lk = unix.Flock_t{Type: unix.F_UNLCK}
		o.err("F_SETLK F_UNLCK", unix.FcntlFlock(uintptr(a), unix.F_SETLK, &lk))
		o.add("other process after unlock: %s", lockInChild(t, "fcntl", pj(root, "f")))
		o.close("close", a)
		return o
	}},
	{"lock/ofd-two-fds", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), bytes.Repeat([]byte("x"), 100))
		a := o.open("open a", pj(root, "f"), unix.O_RDWR, 0)
		b := o.open("open b", pj(root, "f"), unix.O_RDWR, 0)
		lk := unix.Flock_t{Type: unix.F_WRLCK, Start: 0, Len: 50}
		o.err("a F_OFD_SETLK [0,50)", unix.FcntlFlock(uintptr(a), unix.F_OFD_SETLK, &lk))
		lk = unix.Flock_t{Type: unix.F_WRLCK, Start: 40, Len: 20}
		o.err("b F_OFD_SETLK [40,60)", unix.FcntlFlock(uintptr(b), unix.F_OFD_SETLK, &lk))
		lk = unix.Flock_t{Type: unix.F_WRLCK, Start: 50, Len: 20}
		o.err("b F_OFD_SETLK [50,70)", unix.FcntlFlock(uintptr(b), unix.F_OFD_SETLK, &lk))
		o.close("close a", a)
		lk = unix.Flock_t{Type: unix.F_WRLCK, Start: 0, Len: 50}
		o.err("b F_OFD_SETLK [0,50) after a closed", unix.FcntlFlock(uintptr(b), unix.F_OFD_SETLK, &lk))
		o.close("close b", b)
		return o
	}},
}

var syncCases = []posixCase{
	{"sync/fsync-fdatasync", func(t *testing.T, root string) *obs {
		o := &obs{}
		fd := o.open("create", pj(root, "f"), unix.O_CREAT|unix.O_RDWR, 0o644)
		o.write("write", fd, []byte("durable"))
		o.err("fsync", unix.Fsync(fd))
		o.err("fdatasync", unix.Fdatasync(fd))
		o.err("syncfs", unix.Syncfs(fd))
		o.close("close", fd)
		fd = o.open("open read-only", pj(root, "f"), unix.O_RDONLY, 0)
		o.err("fsync read-only", unix.Fsync(fd))
		o.close("close", fd)
		dfd := o.open("open dir", root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		o.err("fsync dir", unix.Fsync(dfd))
		o.close("close dir", dfd)
		fd = o.open("O_SYNC", pj(root, "g"), unix.O_CREAT|unix.O_WRONLY|unix.O_SYNC, 0o644)
		o.write("write O_SYNC", fd, []byte("sync"))
		o.close("close", fd)
		o.file("content", pj(root, "g"))
		return o
	}},
}
