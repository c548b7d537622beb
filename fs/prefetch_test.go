package fs

import (
	"container/list"
	"fmt"
	"sync"
	"testing"

	"github.com/bucketfs/bucketfs/transfer"
)

// TestPrefetchRelistedKeepsCancel: a directory listed again while its
// prefetches are queued (an ls beside the reader) still drops them when
// the reader's order breaks; they used to stay tied to the old listing,
// which nothing updated any more, and were all fetched.
func TestPrefetchRelistedKeepsCancel(t *testing.T) {
	p := &prefetcher{o: PrefetchOptions{Files: 8, MaxSize: 1 << 20, Window: 1 << 30, Parallel: 1},
		dirs: map[string]*pfDir{}, lru: list.New()} // no workers: the test takes the jobs
	p.wake = sync.NewCond(&p.mu)
	var files []transfer.ObjectAttrs
	for i := range 10 {
		files = append(files, transfer.ObjectAttrs{Name: fmt.Sprintf("d/f%d", i), Size: 100, Generation: 1})
	}
	p.listedFiles("d/", files)
	p.opened("d/f0") // the first file: a few ahead
	p.opened("d/f1") // in order: the window
	if len(p.queue) == 0 {
		t.Fatal("nothing queued after two opens in order")
	}
	p.listedFiles("d/", files) // listed again
	p.opened("d/f0")           // out of order: what is queued is dropped
	p.mu.Lock()
	p.stopped = true // next returns once the queue is empty
	p.mu.Unlock()
	var run []string
	for {
		j, ok := p.next()
		if !ok {
			break
		}
		run = append(run, j.a.Name)
	}
	if len(run) != 0 {
		t.Errorf("after the order broke, prefetches %v still ran; want none", run)
	}
}

// TestPrefetchRelistedShorter: a directory listed again with fewer files
// than the reader had reached (files deleted by another process) panicked
// at the next open in order (index out of range in queueAheadLocked: the
// old listing's frontier was kept), and the open failed with EIO. Found
// by four processes creating, renaming, deleting and reading files in a
// few directories.
func TestPrefetchRelistedShorter(t *testing.T) {
	p := &prefetcher{o: PrefetchOptions{Files: 8, MaxSize: 1 << 20, Window: 1 << 30, Parallel: 1},
		dirs: map[string]*pfDir{}, lru: list.New()}
	p.wake = sync.NewCond(&p.mu)
	listing := func(n int) []transfer.ObjectAttrs {
		var files []transfer.ObjectAttrs
		for i := range n {
			files = append(files, transfer.ObjectAttrs{Name: fmt.Sprintf("d/f%d", i), Size: 100, Generation: 1})
		}
		return files
	}
	p.listedFiles("d/", listing(10))
	p.opened("d/f0")
	p.opened("d/f1") // the frontier moves to the end of the window
	p.listedFiles("d/", listing(3))
	p.opened("d/f2") // in order, in the shorter listing
	p.listedFiles("d/", listing(1))
	p.opened("d/f0")
	p.mu.Lock()
	for _, d := range p.dirs {
		if d.frontier > d.order.Len() || d.last >= d.order.Len() {
			t.Errorf("after a shorter listing: frontier %d, last %d, %d files", d.frontier, d.last, d.order.Len())
		}
	}
	p.mu.Unlock()
}

// filesOrder is a directory of regular files only, in this order.
type filesOrder []transfer.ObjectAttrs

func (o filesOrder) Len() int { return len(o) }

func (o filesOrder) file(i int) (transfer.ObjectAttrs, bool) { return o[i], true }

func (o filesOrder) pos(name string) (int, bool) {
	for i, a := range o {
		if a.Name == name {
			return i, true
		}
	}
	return 0, false
}

// listedFiles is listed, given the directory's regular files in order.
func (p *prefetcher) listedFiles(prefix string, files []transfer.ObjectAttrs) {
	p.listedOrder(prefix, filesOrder(files))
}
