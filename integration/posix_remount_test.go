package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/testutil"
	"golang.org/x/sys/unix"
)

// Persistence: what a case did on one mount must still be there after an
// unmount (which flushes to the bucket) and a mount with the same cache
// directory, and after a mount with a new, empty cache directory (so that
// everything comes from the bucket). On the local directory, "remount" is
// nothing: the after step sees what before did.

// remountCase is a persistence case: before changes things under root,
// after observes them.
type remountCase struct {
	name   string
	before func(t *testing.T, root string) *obs
	after  func(t *testing.T, root string) *obs
}

// remountPhases are the steps of a remount case compared with the local
// directory: before is the first mount, then the remounts.
var remountPhases = []string{"before", "same-cache", "fresh-cache"}

func remountName(name, phase string) string { return "remount/" + name + "/" + phase }

func remountCases() []remountCase {
	mtime := unix.NsecToTimespec(time.Date(2004, 5, 6, 7, 8, 9, 0, time.UTC).UnixNano())
	mtimeNs := unix.NsecToTimespec(time.Date(2005, 6, 7, 8, 9, 10, 987654321, time.UTC).UnixNano())
	statMtime := func(o *obs, what, path string) {
		var st unix.Stat_t
		err := unix.Lstat(path, &st)
		o.err(what, err)
		if err == nil {
			o.add("%s: mtime %d.%09d", what, st.Mtim.Sec, st.Mtim.Nsec)
		}
	}
	statAtime := func(o *obs, what, path string) {
		var st unix.Stat_t
		err := unix.Lstat(path, &st)
		o.err(what, err)
		if err == nil {
			o.add("%s: atime %d.%09d, mtime %d.%09d", what, st.Atim.Sec, st.Atim.Nsec, st.Mtim.Sec, st.Mtim.Nsec)
		}
	}
	owner := func(o *obs, what, path string) {
		var st unix.Stat_t
		err := unix.Lstat(path, &st)
		o.err(what, err)
		o.add("%s: owner %d:%d", what, st.Uid, st.Gid)
	}
	return append([]remountCase{
		{"content", func(t *testing.T, root string) *obs {
			o := &obs{}
			o.mkfile(pj(root, "small"), []byte("hello world"))
			o.mkfile(pj(root, "empty"), nil)
			o.mkfile(pj(root, "big"), testutil.RandomBytes(3<<20+5, 21))
			fd := o.open("create sparse", pj(root, "sparse"), unix.O_CREAT|unix.O_WRONLY, 0o644)
			o.pwrite("pwrite at 2 MiB", fd, []byte("after the hole"), 2<<20)
			o.close("close", fd)
			o.mkfile(pj(root, "shrunk"), bytes.Repeat([]byte("s"), 10000))
			o.err("truncate down", unix.Truncate(pj(root, "shrunk"), 10))
			o.mkfile(pj(root, "grown"), []byte("g"))
			o.err("truncate up", unix.Truncate(pj(root, "grown"), 5000))
			return o
		}, func(t *testing.T, root string) *obs {
			o := &obs{}
			o.tree("tree", root)
			return o
		}},
		{"renamed", func(t *testing.T, root string) *obs {
			o := &obs{}
			o.mkfile(pj(root, "a"), []byte("a"))
			o.mkfile(pj(root, "b"), []byte("b"))
			o.err("rename a over b", unix.Rename(pj(root, "a"), pj(root, "b")))
			o.mkdir(pj(root, "d"))
			o.mkfile(pj(root, "d", "x"), []byte("x"))
			o.err("unlink d/x", unix.Unlink(pj(root, "d", "x")))
			o.mkdir(pj(root, "empty"))
			return o
		}, func(t *testing.T, root string) *obs {
			o := &obs{}
			o.tree("tree", root)
			return o
		}},
		{"dir-renamed", func(t *testing.T, root string) *obs {
			o := &obs{}
			o.mkdir(pj(root, "src"))
			o.mkdir(pj(root, "src", "sub"))
			o.mkfile(pj(root, "src", "f"), []byte("f"))
			o.mkfile(pj(root, "src", "sub", "g"), testutil.RandomBytes(100000, 22))
			o.err("rename src dst", unix.Rename(pj(root, "src"), pj(root, "dst")))
			return o
		}, func(t *testing.T, root string) *obs {
			o := &obs{}
			o.tree("tree", root)
			return o
		}},
		{"exchanged", func(t *testing.T, root string) *obs {
			// Contents, modes and a symbolic link swap; the bucket has
			// them after the remount.
			o := &obs{}
			o.mkfile(pj(root, "a"), testutil.RandomBytes(70000, 23))
			o.err("chmod a", os.Chmod(pj(root, "a"), 0o600))
			o.err("symlink", os.Symlink("somewhere", pj(root, "l")))
			o.mkfile(pj(root, "b"), []byte("b"))
			o.err("exchange a b", unix.Renameat2(unix.AT_FDCWD, pj(root, "a"), unix.AT_FDCWD, pj(root, "b"), unix.RENAME_EXCHANGE))
			o.err("exchange b l", unix.Renameat2(unix.AT_FDCWD, pj(root, "b"), unix.AT_FDCWD, pj(root, "l"), unix.RENAME_EXCHANGE))
			return o
		}, func(t *testing.T, root string) *obs {
			o := &obs{}
			o.tree("tree", root)
			for _, n := range []string{"a", "b", "l"} {
				o.stat(n, pj(root, n))
			}
			return o
		}},
		{"mtime", func(t *testing.T, root string) *obs {
			o := &obs{}
			o.mkfile(pj(root, "f"), []byte("x"))
			o.err("utimes", unix.UtimesNano(pj(root, "f"), []unix.Timespec{mtime, mtime}))
			o.mkfile(pj(root, "ns"), []byte("x"))
			o.err("utimensat with nanoseconds", unix.UtimesNano(pj(root, "ns"), []unix.Timespec{mtimeNs, mtimeNs}))
			statMtime(o, "stat f", pj(root, "f"))
			statMtime(o, "stat ns", pj(root, "ns"))
			// A directory's time, set last (as tar and rsync -a do).
			o.mkdir(pj(root, "d"))
			o.mkfile(pj(root, "d", "f"), []byte("x"))
			o.err("utimes dir", unix.UtimesNano(pj(root, "d"), []unix.Timespec{mtime, mtime}))
			statMtime(o, "stat d", pj(root, "d"))
			return o
		}, func(t *testing.T, root string) *obs {
			o := &obs{}
			statMtime(o, "stat f", pj(root, "f"))
			statMtime(o, "stat ns", pj(root, "ns"))
			statMtime(o, "stat d", pj(root, "d"))
			return o
		}},
		{"atime", func(t *testing.T, root string) *obs {
			// An access time set explicitly is kept in the bucket
			// (nothing here reads the names: a read moves a local
			// disk's atime).
			o := &obs{}
			o.mkfile(pj(root, "f"), []byte("x"))
			o.mkdir(pj(root, "d"))
			o.err("symlink", unix.Symlink("target", pj(root, "l")))
			for _, n := range []string{"f", "d", "l"} {
				o.err("utimensat "+n, utimensat(pj(root, n), at(2002), at(2001)))
				statAtime(o, "stat "+n, pj(root, n))
			}
			return o
		}, func(t *testing.T, root string) *obs {
			o := &obs{}
			for _, n := range []string{"f", "d", "l"} {
				statAtime(o, "stat "+n, pj(root, n))
			}
			return o
		}},
		{"dir-nlink", func(t *testing.T, root string) *obs {
			// The link count of a directory listed from the bucket
			// (fresh cache) or from names.db (same cache).
			o := &obs{}
			o.mkdir(pj(root, "d"))
			o.mkdir(pj(root, "d", "a"))
			o.mkdir(pj(root, "d", "b"))
			o.mkfile(pj(root, "d", "f"), []byte("x"))
			o.nlink("d", pj(root, "d"))
			return o
		}, func(t *testing.T, root string) *obs {
			o := &obs{}
			o.nlink("d", pj(root, "d"))
			return o
		}},
		{"mode", func(t *testing.T, root string) *obs {
			o := &obs{}
			o.mkfile(pj(root, "f"), []byte("x"))
			o.err("chmod 0600", unix.Chmod(pj(root, "f"), 0o600))
			o.mkfile(pj(root, "exe"), []byte("#!/bin/sh\n"))
			o.err("chmod 0755", unix.Chmod(pj(root, "exe"), 0o755))
			o.mkdir(pj(root, "d"))
			o.err("chmod dir 0700", unix.Chmod(pj(root, "d"), 0o700))
			o.err("mkdir 0750", unix.Mkdir(pj(root, "m"), 0o750))
			// A directory's mode moves with it.
			o.mkdir(pj(root, "r"))
			o.mkfile(pj(root, "r", "f"), []byte("x"))
			o.err("chmod r 0711", unix.Chmod(pj(root, "r"), 0o711))
			o.err("rename r r2", unix.Rename(pj(root, "r"), pj(root, "r2")))
			o.stat("r2", pj(root, "r2"))
			return o
		}, func(t *testing.T, root string) *obs {
			o := &obs{}
			o.stat("f", pj(root, "f"))
			o.stat("exe", pj(root, "exe"))
			o.stat("d", pj(root, "d"))
			o.stat("m", pj(root, "m"))
			o.stat("r2", pj(root, "r2"))
			return o
		}},
		{"owner", func(t *testing.T, root string) *obs {
			o := &obs{}
			o.mkfile(pj(root, "f"), []byte("x"))
			o.err("chown 1234:5678", unix.Chown(pj(root, "f"), 1234, 5678))
			o.mkdir(pj(root, "d"))
			o.err("chown dir 4321:8765", unix.Chown(pj(root, "d"), 4321, 8765))
			owner(o, "d", pj(root, "d"))
			return o
		}, func(t *testing.T, root string) *obs {
			o := &obs{}
			owner(o, "f", pj(root, "f"))
			owner(o, "d", pj(root, "d"))
			return o
		}},
		{"mmap", func(t *testing.T, root string) *obs {
			o := &obs{}
			o.mkfile(pj(root, "f"), bytes.Repeat([]byte("-"), 3*4096))
			fd := o.open("open", pj(root, "f"), unix.O_RDWR, 0)
			if fd < 0 {
				return o
			}
			m, err := unix.Mmap(fd, 0, 3*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			o.err("mmap", err)
			if err == nil {
				copy(m[100:], "page one")
				copy(m[2*4096+7:], "page three")
				o.err("msync", unix.Msync(m, unix.MS_SYNC))
				o.err("munmap", unix.Munmap(m))
			}
			o.close("close", fd)
			return o
		}, func(t *testing.T, root string) *obs {
			o := &obs{}
			o.file("f", pj(root, "f"))
			return o
		}},
		{"xattr", func(t *testing.T, root string) *obs {
			o := &obs{}
			o.mkfile(pj(root, "f"), []byte("x"))
			o.err("setxattr user.k", unix.Setxattr(pj(root, "f"), "user.k", []byte("kept"), 0))
			return o
		}, func(t *testing.T, root string) *obs {
			o := &obs{}
			o.getxattr("getxattr user.k", pj(root, "f"), "user.k")
			return o
		}},
		{"symlink", func(t *testing.T, root string) *obs {
			o := &obs{}
			o.mkfile(pj(root, "target"), []byte("t"))
			o.err("symlink", unix.Symlink("target", pj(root, "link")))
			o.err("symlink dangling", unix.Symlink("../nowhere", pj(root, "dangling")))
			return o
		}, func(t *testing.T, root string) *obs {
			o := &obs{}
			o.tree("tree", root)
			return o
		}},
		{"hardlink", func(t *testing.T, root string) *obs {
			o := &obs{}
			o.mkfile(pj(root, "a"), []byte("linked"))
			o.err("link", unix.Link(pj(root, "a"), pj(root, "b")))
			return o
		}, func(t *testing.T, root string) *obs {
			o := &obs{}
			o.stat("a", pj(root, "a"))
			o.stat("b", pj(root, "b"))
			o.file("b", pj(root, "b"))
			return o
		}},
		{"names", func(t *testing.T, root string) *obs {
			o := &obs{}
			for _, n := range []string{strings.Repeat("L", 255), "café", "cafe\u0301", "a b#?%*", "emoji-📁"} {
				o.mkfile(pj(root, n), []byte(n))
			}
			p := root
			for i := range 30 {
				p = filepath.Join(p, "l"+string(rune('a'+i%26)))
				if err := os.Mkdir(p, 0o755); err != nil {
					o.err("mkdir", err)
				}
			}
			o.mkfile(pj(p, "bottom"), []byte("deep"))
			return o
		}, func(t *testing.T, root string) *obs {
			o := &obs{}
			o.tree("tree", root)
			return o
		}},
	}, typesRemountCases()...)
}

func TestPOSIXRemount(t *testing.T) {
	withUmask(t, 0o022)
	cases := remountCases()
	local := t.TempDir()
	localAfter := map[string]*obs{}
	localBefore := map[string]*obs{}
	for _, c := range cases {
		root := filepath.Join(local, c.name)
		if err := os.Mkdir(root, 0o755); err != nil {
			t.Fatal(err)
		}
		localBefore[c.name] = c.before(t, root)
		localAfter[c.name] = c.after(t, root)
	}

	emu := startEmulator(t, nil)
	cacheDir := t.TempDir()
	phases := []struct {
		name     string
		cacheDir string
	}{{"before", cacheDir}, {"same-cache", cacheDir}, {"fresh-cache", t.TempDir()}}
	for _, ph := range phases {
		m := mount(t, emu, mountOpts{cacheDir: ph.cacheDir})
		for _, c := range cases {
			t.Run(c.name+"/"+ph.name, func(t *testing.T) {
				requireLive(t, m)
				root := m.path(c.name)
				var got, want *obs
				if ph.name == "before" {
					if err := withWatchdog(t, m, posixCaseTimeout, func() error { return os.Mkdir(root, 0o755) }); err != nil {
						t.Fatalf("mkdir on the mount: %v", err)
					}
					got, want = withWatchdog(t, m, posixCaseTimeout, func() *obs { return c.before(t, root) }), localBefore[c.name]
				} else {
					got, want = withWatchdog(t, m, posixCaseTimeout, func() *obs { return c.after(t, root) }), localAfter[c.name]
				}
				judge(t, "remount/"+c.name+"/"+ph.name, diffObs(want, got))
			})
		}
		requireLive(t, m)
		m.unmount(t)
	}
}
