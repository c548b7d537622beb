// Package readpattern decides, from one handle's reads of an object
// larger than the cache fetches whole at once, what its download fetches
// next: nothing more than what is read, the chunk ahead of a reader in
// order, or the whole object.
//
// The evidence (package cache's fetch.go has the reasons): a handle that
// has read a whole chunk in order (a copy, a scan, a media player; a
// quarter of a chunk if it began at the object's start, as whole-file
// readers do), or an object a quarter of whose chunks are present or
// being fetched, is fetched whole; a reader in order past a quarter of a
// chunk gets the next chunk ahead of it. A reader of a footer or an
// index (Parquet, ORC, zip, MP4 read that first) fetches a chunk or two,
// not the object.
//
// Reads keeps one handle's run under its own lock, a leaf: Note may be
// called by several reads of the handle at once. Decide is a pure
// function. Nothing here does I/O.
package readpattern

import "sync"

// CoverageShare: once 1/CoverageShare of an object's chunks are present
// or being fetched, the rest is fetched too. Being fetched counts: a read
// may have its bytes before its chunk is marked present, and the next
// read must see the same evidence whatever the timing.
const CoverageShare = 4

// Reads is what one handle's reads showed so far. The zero value is a
// handle that has read nothing.
type Reads struct {
	mu    sync.Mutex
	start int64 // where the reads in order began
	end   int64 // where they reached
	run   int64 // bytes they read
}

// Seen is what Note made of one read.
type Seen struct {
	InOrder   bool  // the read starts within the slack of where the last one ended
	Run       int64 // bytes read in order so far, this read's included
	FromStart bool  // the run began at the object's start
}

// Continues reports whether a read of n bytes that Note saw continues a
// run in order past its first read.
func (s Seen) Continues(n int64) bool { return s.InOrder && s.Run > n }

// Note records a read of n bytes at off. A read that starts within slack
// bytes of where the last one ended continues the run (the kernel sends
// a reader's reads several at once, and they may arrive out of order);
// any other starts a new run.
func (r *Reads) Note(off, n, slack int64) Seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	inOrder := off >= r.end-slack && off <= r.end+slack
	if inOrder {
		r.run += max(off+n-r.end, 0)
		r.end = max(r.end, off+n)
	} else {
		r.start, r.end, r.run = off, off+n, n
	}
	return Seen{InOrder: inOrder, Run: r.run, FromStart: r.start == 0}
}

// Action is what a download does after a read.
type Action int

const (
	// Read: only what is read (the download's readers ask for it).
	Read Action = iota
	// Readahead: also the chunk after the one the read ends in.
	Readahead
	// Whole: the whole object, in the background.
	Whole
)

// Decide is what a download of chunk-sized chunks, covered of whose
// total chunks are present or being fetched, does after a read that Note
// saw as s.
func Decide(s Seen, chunk int64, covered, total int) Action {
	switch {
	case s.Run >= chunk || s.FromStart && s.Run >= chunk/4 || covered*CoverageShare >= total:
		return Whole
	case s.InOrder && s.Run >= chunk/4:
		// Once the run is more than one read's worth: the kernel splits
		// a read of a MiB into several in order, a random reader's are
		// not a run.
		return Readahead
	}
	return Read
}
