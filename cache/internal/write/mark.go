package write

import (
	"os"
	"time"
)

// An open for writing that writes nothing, through passthrough.
//
// A hidden handle (the kernel writes the cache file itself) makes its
// copy changed from the open, before the kernel may write it: the
// daemon does not see the writes, and a crash must not leave a written
// copy taken for the bucket's version. A program that opens a file read-
// write and only reads it (an editor, a check of the size, touch) would
// then make an upload of the same bytes, and a new generation, where
// writes through the daemon fetch and change nothing until the first
// one (fs/lazywrite.go). So an open of a clean copy that no other handle
// writes marks the cache file: its modification time is set 1 ns back
// (before the kernel has the descriptor). Every write the kernel makes
// to the file (write, pwrite, a store through mmap) sets the time to the
// clock's, which is never that mark; the daemon's own changes (a
// truncation, fallocate) are counted by the cache. At the close, a file
// with its size and its mark, in an entry no other change reached (no
// other writer, no rename, no upload), is not changed: the cache
// restores its record before the open (cache/untouched.go), and the
// file gets its time back. If the mark is gone or in doubt, the file
// stays changed and is sent: an upload of the same bytes costs a
// request, never data.

// Mark is the mark set on the file of a hidden open. Its fields are set
// by Start, before the handle is shared, and only read after.
type Mark struct {
	size  int64     // the file's size at the open
	mtime time.Time // the file's modification time at the open
	mark  time.Time // the time set instead: mtime - 1 ns
}

// Start sets the mark on f, the handle's file, before the kernel has
// the descriptor (so no write of the handle can come first). It reports
// false if the file cannot be marked: then nothing is undone at the
// close.
func (m *Mark) Start(f *os.File) bool {
	st, err := f.Stat()
	if err != nil {
		return false
	}
	m.size, m.mtime = st.Size(), st.ModTime()
	m.mark = m.mtime.Add(-time.Nanosecond)
	return os.Chtimes(f.Name(), time.Time{}, m.mark) == nil
}

// Holds reports whether st, a stat of the marked file, still has the
// mark.
func (m *Mark) Holds(st os.FileInfo) bool {
	return st.Size() == m.size && st.ModTime().Equal(m.mark)
}

// Time is the file's modification time before the mark.
func (m *Mark) Time() time.Time { return m.mtime }
