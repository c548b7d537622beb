package names

import "context"

// Directories listed ahead (issue 35, item 1). A walk (find, du, rsync,
// a data loader's first epoch) lists one directory at a time, each
// listing waiting for its answer: 200 directories behind 30 ms of WAN are
// 200 round trips in a row. When an application lists a directory, its
// subdirectories whose listings are not known are listed in the
// background, aheadParallel at a time, so that the walk finds them known
// when it gets there. Only one level ahead of what an application
// listed: an ls of a bucket's root does not walk the bucket. Background
// listings never hold up one an application waits for: they have slots
// of their own, and one asked for in the foreground meanwhile is simply
// made by its caller (and the background one, finding it known, does
// nothing). At most aheadQueued wait; past it, the oldest are dropped
// (the walk has moved on).

const (
	aheadParallel = 16
	aheadQueued   = 4096
	aheadPerDir   = 1024 // subdirectories of one listing queued at most
)

// ahead is the queue of directories to list ahead. Fields marked so are
// guarded by Cache.mu.
type ahead struct {
	queue   []string            // guarded by Cache.mu: prefixes waiting
	queued  map[string]struct{} // guarded by Cache.mu: those in queue or being listed
	running int                 // guarded by Cache.mu: listings under way
	warn    WarnFunc            // guarded by Cache.mu: the last foreground caller's
}

// listAhead queues the subdirectories of prefix (whose listing l an
// application just asked for) whose listings are not known, and starts
// workers for them. warn reports hidden objects, as for the application.
func (m *Cache) listAhead(prefix string, l *Listing, warn WarnFunc) {
	if m.ttl <= 0 || l.Dirs() == 0 {
		return
	}
	subs := l.dirNames(aheadPerDir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bg.closed {
		return
	}
	if warn != nil {
		m.ahead.warn = warn
	}
	if m.ahead.queued == nil {
		m.ahead.queued = map[string]struct{}{}
	}
	for _, seg := range subs {
		p := prefix + seg + "/"
		if _, ok := m.ahead.queued[p]; ok {
			continue
		}
		if known, ok := m.known.listing(p); ok && (m.now().Before(known.expires) || m.trustedLocked(known.fetched)) {
			continue
		}
		m.ahead.queued[p] = struct{}{}
		m.ahead.queue = append(m.ahead.queue, p)
	}
	if over := len(m.ahead.queue) - aheadQueued; over > 0 {
		for _, p := range m.ahead.queue[:over] {
			delete(m.ahead.queued, p)
		}
		m.ahead.queue = append([]string(nil), m.ahead.queue[over:]...)
	}
	for m.ahead.running < aheadParallel && m.ahead.running < len(m.ahead.queue) {
		m.ahead.running++
		m.bg.wg.Add(1)
		go m.aheadWorker()
	}
}

// aheadWorker lists queued directories until the queue is empty or the
// Cache closes.
func (m *Cache) aheadWorker() {
	defer m.bg.wg.Done()
	for {
		m.mu.Lock()
		if len(m.ahead.queue) == 0 || m.bg.closed {
			m.ahead.running--
			m.mu.Unlock()
			return
		}
		p := m.ahead.queue[0]
		m.ahead.queue = m.ahead.queue[1:]
		warn := m.ahead.warn
		m.mu.Unlock()
		if warn == nil {
			warn = func(string, string, ...any) {}
		}
		m.ensure(p)
		ctx, cancel := context.WithTimeout(m.bg.ctx, askTimeout)
		if _, err := m.listRemote(ctx, p, warn, false); err != nil && m.bg.ctx.Err() == nil {
			m.log.Debug("listing a directory ahead failed; it is listed when it is used", "prefix", p, "err", err)
		}
		cancel()
		m.mu.Lock()
		delete(m.ahead.queued, p)
		m.mu.Unlock()
	}
}
