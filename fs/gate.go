package fs

// The clock's asks wait for a moment when no lookup is being answered.
// Linux (since 6.13 or so) drops the attributes carried by a LOOKUP or
// READDIRPLUS reply when an inode was evicted while the request was in
// flight: they might be older than the eviction. Each entry of such a
// reply then costs the next stat a GETATTR round trip. The clock is woken
// by the nodes a READDIRPLUS makes, so, unguarded, nearly every prune
// fell inside one: ls -l of 100,000 names sent 14,000 GETATTRs more with
// the bound than without it, and ran about 10% slower (2026-11-28). So
// the clock waits, a bounded time, for a quiet moment: no such request
// in flight, and none answered in the last gateSettle. The settling
// time is there because the kernel reads a READDIRPLUS reply in the
// reader's own context after the daemon has written it: an eviction in
// between spoils it as surely as one before. ls -l's prunes then land
// while ls stats what it read; a walk that never pauses (find) does not
// stat, so it loses nothing when the wait runs out.
//
// entryGate.mu is a leaf (LOCK ORDER, fs.go).

import (
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// gateWait bounds the clock's wait for a quiet moment: a mount that is
// never quiet (parallel walks) is still held to its bound. gateSettle is
// how long after the last reply a moment counts as quiet: parsing a
// reply of a few hundred entries takes the kernel well under that.
const (
	gateWait   = 50 * time.Millisecond
	gateSettle = 2 * time.Millisecond
)

// entryGate counts the requests in flight whose replies make inodes.
type entryGate struct {
	mu   sync.Mutex
	busy int           // guarded by mu
	idle chan struct{} // guarded by mu: closed when busy falls to 0; nil while it is 0
	last time.Time     // guarded by mu: when the last one was answered
}

func (g *entryGate) enter() {
	g.mu.Lock()
	if g.busy == 0 {
		g.idle = make(chan struct{})
	}
	g.busy++
	g.mu.Unlock()
}

func (g *entryGate) leave() {
	g.mu.Lock()
	g.busy--
	g.last = time.Now()
	if g.busy == 0 {
		close(g.idle)
		g.idle = nil
	}
	g.mu.Unlock()
}

// quiet waits for a quiet moment (above), or for at most max; it
// reports whether it saw one.
func (g *entryGate) quiet(max time.Duration) bool {
	t := time.NewTimer(max)
	defer t.Stop()
	for {
		g.mu.Lock()
		idle, settled := g.idle, time.Since(g.last)
		g.mu.Unlock()
		var wake <-chan time.Time
		switch {
		case idle != nil: // in flight: wait for it to be answered
		case settled >= gateSettle:
			return true
		default: // answered a moment ago: wait for the kernel to read it
			settle := time.NewTimer(gateSettle - settled)
			defer settle.Stop()
			wake = settle.C
		}
		select {
		case <-idle:
		case <-wake:
		case <-t.C:
			return false
		}
	}
}

// gatedFS counts the LOOKUP and READDIRPLUS requests of the wrapped file
// system in its gate. Only these: the other requests that make inodes
// (create, mkdir, symlink, link) are rare beside them.
type gatedFS struct {
	fuse.RawFileSystem
	gate *entryGate
}

var _ fuse.RawFileSystem = (*gatedFS)(nil)

func (g *gatedFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	g.gate.enter()
	defer g.gate.leave()
	return g.RawFileSystem.Lookup(cancel, h, name, out)
}

func (g *gatedFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	g.gate.enter()
	defer g.gate.leave()
	return g.RawFileSystem.ReadDirPlus(cancel, in, out)
}
