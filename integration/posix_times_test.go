package integration

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// timeCases: the times a local disk moves. The times are first set far
// in the past (utimes to 2001), so that "moved" is "recent now", with no
// wait for the clock to tick.
var timeCases = []posixCase{
	{"times/ctime-after-utimes", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("x"))
		o.err("utimes to 2001", unix.UtimesNano(pj(root, "f"), past2()))
		o.times("f", pj(root, "f"))
		o.mkdir(pj(root, "d"))
		o.err("utimes dir to 2001", unix.UtimesNano(pj(root, "d"), past2()))
		o.times("d", pj(root, "d"))
		return o
	}},
	{"times/dir-entries", func(t *testing.T, root string) *obs {
		o := &obs{}
		o.mkdir(pj(root, "d"))
		o.mkdir(pj(root, "e"))
		o.mkfile(pj(root, "d", "f"), []byte("x"))
		steps := []struct {
			what string
			do   func() error
		}{
			{"create", func() error {
				fd, err := unix.Open(pj(root, "d", "new"), unix.O_CREAT|unix.O_WRONLY, 0o644)
				if err == nil {
					unix.Close(fd)
				}
				return err
			}},
			{"mkdir", func() error { return unix.Mkdir(pj(root, "d", "sub"), 0o755) }},
			{"symlink", func() error { return unix.Symlink("target", pj(root, "d", "link")) }},
			{"mkfifo", func() error { return unix.Mkfifo(pj(root, "d", "fifo"), 0o644) }},
			{"rename within", func() error { return unix.Rename(pj(root, "d", "new"), pj(root, "d", "new2")) }},
			{"unlink", func() error { return unix.Unlink(pj(root, "d", "new2")) }},
			{"rmdir", func() error { return unix.Rmdir(pj(root, "d", "sub")) }},
			{"rename out", func() error { return unix.Rename(pj(root, "d", "f"), pj(root, "e", "f")) }},
		}
		for _, s := range steps {
			o.err("utimes d to 2001", unix.UtimesNano(pj(root, "d"), past2()))
			o.err("utimes e to 2001", unix.UtimesNano(pj(root, "e"), past2()))
			o.err(s.what, s.do())
			o.times("d after "+s.what, pj(root, "d"))
			o.times("e after "+s.what, pj(root, "e"))
		}
		// Set last, the directory's time is the one set (tar, rsync -a).
		o.err("utimes d to 2001", unix.UtimesNano(pj(root, "d"), past2()))
		o.times("d at the end", pj(root, "d"))
		return o
	}},
	{"times/atime-explicit", func(t *testing.T, root string) *obs {
		// An access time set explicitly (touch -a, tar, rsync --atimes,
		// cp -p) is kept, apart from the modification time. Nothing is
		// read here: a local disk moves atime on a read (relatime), the
		// mount does not (docs/design.md, limits).
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("x"))
		o.mkdir(pj(root, "d"))
		o.err("symlink", unix.Symlink("target", pj(root, "l")))
		for _, name := range []string{"f", "d", "l"} {
			p := pj(root, name)
			o.err(name+": atime 2002, mtime 2001", utimensat(p, at(2002), at(2001)))
			o.allTimes(name, p)
			o.err(name+": atime 2003 only (touch -a)", utimensat(p, at(2003), omit()))
			o.allTimes(name, p)
			o.err(name+": mtime 2004 only (touch -m)", utimensat(p, omit(), at(2004)))
			o.allTimes(name, p)
			if name != "l" { // chmod follows a link, which reads it: a local disk moves its atime
				o.err(name+": chmod", unix.Chmod(p, 0o700))
				o.allTimes(name, p)
			}
		}
		return o
	}},
	{"times/mtime-in-the-future", func(t *testing.T, root string) *obs {
		// ctime is the time of the change, not the time set.
		o := &obs{}
		o.mkfile(pj(root, "f"), []byte("x"))
		o.mkdir(pj(root, "d"))
		for _, name := range []string{"f", "d"} {
			p := pj(root, name)
			o.err(name+": utimes to 2035", utimensat(p, at(2035), at(2035)))
			o.allTimes(name, p)
		}
		fd := o.open("open f", pj(root, "f"), unix.O_WRONLY|unix.O_APPEND, 0)
		n, err := unix.Write(fd, []byte("y"))
		o.n("append", n, err)
		o.close("close", fd)
		o.allTimes("f after a write", pj(root, "f"))
		return o
	}},
}

// utimensat sets the access and modification times of path, not
// following a symbolic link.
func utimensat(path string, atime, mtime unix.Timespec) error {
	return unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{atime, mtime}, unix.AT_SYMLINK_NOFOLLOW)
}

// at is January 1st of year, for utimensat.
func at(year int) unix.Timespec {
	return unix.NsecToTimespec(time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
}

// omit is UTIME_OMIT: utimensat leaves that time as it is.
func omit() unix.Timespec { return unix.Timespec{Nsec: unix.UTIME_OMIT} }

// past2 is utimes' argument for 2001 (atime and mtime).
func past2() []unix.Timespec {
	ts := unix.NsecToTimespec(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return []unix.Timespec{ts, ts}
}

// times records whether path's modification and change times are recent
// (within a minute of now), or else their values.
func (o *obs) times(what, path string) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		o.err(what, err)
		return
	}
	show := func(ts unix.Timespec) string {
		if time.Since(time.Unix(ts.Unix())).Abs() < time.Minute {
			return "recent"
		}
		return time.Unix(ts.Unix()).UTC().Format(time.RFC3339Nano)
	}
	o.add("%s: mtime %s, ctime %s", what, show(st.Mtim), show(st.Ctim))
}

// allTimes records path's access, modification and change times, as
// times does.
func (o *obs) allTimes(what, path string) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		o.err(what, err)
		return
	}
	o.add("%s: atime %s, mtime %s, ctime %s", what, showTime(st.Atim), showTime(st.Mtim), showTime(st.Ctim))
}

// showTime is "recent" for a time within a minute of now, else the time.
func showTime(ts unix.Timespec) string {
	if time.Since(time.Unix(ts.Unix())).Abs() < time.Minute {
		return "recent"
	}
	return time.Unix(ts.Unix()).UTC().Format(time.RFC3339Nano)
}
