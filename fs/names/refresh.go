package names

import (
	"context"
	"sync"
)

// Stale-while-revalidate. Past the TTL, a name, a listing or a
// placeholder that is known (of any age, from this mount or from
// names.db) is answered at once, and asked again in the background: one
// refresh per name or prefix in flight, at most refreshParallel at a
// time, all owned by the Cache and waited for by Close. A refresh that
// fails keeps what is known (a bucket that does not answer never makes a
// known name wait or fail). A refresh that finds a change applies it as
// a foreground answer would, and notes the name: the function set with
// OnChange is told, from the notifier goroutine, so that package fs can
// have the kernel drop what it holds of the name (its entry and
// attributes, kept for the TTL). So what a mount shows is at most one
// TTL plus one refresh older than the bucket.
//
// With Options.Strict (or TTL 0), an answer past the TTL waits for the
// bucket, as before.

// refreshParallel bounds the refreshes asking the bucket at once;
// refreshQueued bounds those waiting (more are not started: the next use
// of the name asks again).
const (
	refreshParallel = 8
	refreshQueued   = 1024
)

// refresher is the Cache's background work: refreshes and the notes of
// changed names. Fields marked so are guarded by Cache.mu.
type refresher struct {
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	sem      chan struct{}
	closed   bool                // guarded by Cache.mu
	inflight map[string]struct{} // guarded by Cache.mu: refreshes started, by key

	onChange func(name string) // guarded by Cache.mu
	notes    []string          // guarded by Cache.mu: names changed, not yet told
	kick     chan struct{}
}

func (r *refresher) init() {
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.sem = make(chan struct{}, refreshParallel)
	r.inflight = map[string]struct{}{}
	r.kick = make(chan struct{}, 1)
}

// close stops the refreshes and the notifier and waits for them; mu is
// Cache.mu.
func (r *refresher) close(mu *sync.Mutex) {
	mu.Lock()
	r.closed = true
	mu.Unlock()
	r.cancel()
	r.wg.Wait()
}

// OnChange sets fn, told of each name (a full name, no trailing '/')
// whose answer a request to the bucket changed: another version, kind or
// attributes, or a name that came or went. fn is called from one
// goroutine of the Cache, never from a caller of its methods, so it may
// wait for the kernel.
func (m *Cache) OnChange(fn func(name string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bg.onChange == nil && !m.bg.closed {
		m.bg.wg.Add(1)
		go m.notifier()
	}
	m.bg.onChange = fn
}

// noteChangedLocked notes that name's answer changed.
func (m *Cache) noteChangedLocked(name string) {
	if m.bg.onChange == nil || name == "" {
		return
	}
	m.bg.notes = append(m.bg.notes, name)
	select {
	case m.bg.kick <- struct{}{}:
	default:
	}
}

// notifier tells onChange of the names noted, until Close.
func (m *Cache) notifier() {
	defer m.bg.wg.Done()
	for {
		select {
		case <-m.bg.kick:
		case <-m.bg.ctx.Done():
			return
		}
		m.mu.Lock()
		notes, fn := m.bg.notes, m.bg.onChange
		m.bg.notes = nil
		m.mu.Unlock()
		seen := map[string]bool{}
		for _, n := range notes {
			if !seen[n] {
				seen[n] = true
				fn(n)
			}
		}
	}
}

// revalidate says whether an answer past the TTL is given at once (and
// refreshed in the background).
func (m *Cache) revalidate() bool { return m.ttl > 0 && !m.strict }

// startRefresh runs fn in the background, unless a refresh of key is in
// flight, too many wait, or the Cache is closed.
func (m *Cache) startRefresh(key string, fn func(ctx context.Context)) {
	m.mu.Lock()
	_, busy := m.bg.inflight[key]
	if busy || m.bg.closed || len(m.bg.inflight) >= refreshQueued {
		m.mu.Unlock()
		return
	}
	m.bg.inflight[key] = struct{}{}
	m.bg.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.bg.wg.Done()
		defer func() {
			m.mu.Lock()
			delete(m.bg.inflight, key)
			m.mu.Unlock()
		}()
		select {
		case m.bg.sem <- struct{}{}:
		case <-m.bg.ctx.Done():
			return
		}
		defer func() { <-m.bg.sem }()
		ctx, cancel := context.WithTimeout(m.bg.ctx, askTimeout)
		defer cancel()
		fn(ctx)
	}()
}

func (m *Cache) refreshListing(prefix string, warn WarnFunc) {
	m.startRefresh("l"+prefix, func(ctx context.Context) {
		if _, err := m.listRemote(ctx, prefix, warn, true); err != nil {
			m.log.Debug("refreshing a listing failed; the known one stays", "prefix", prefix, "err", err)
		}
	})
}

func (m *Cache) refreshEntry(name string, warn WarnFunc) {
	m.startRefresh("e"+name, func(ctx context.Context) {
		if _, err := m.resolveRemote(ctx, name, warn); err != nil {
			m.log.Debug("refreshing a name failed; the known answer stays", "name", name, "err", err)
		}
	})
}

func (m *Cache) refreshPlaceholder(prefix string) {
	m.startRefresh("p"+prefix, func(ctx context.Context) {
		if _, _, err := m.dirAttrsRemote(ctx, prefix); err != nil {
			m.log.Debug("refreshing a directory's attributes failed; the known ones stay", "prefix", prefix, "err", err)
		}
	})
}

// differs says whether a and b are different answers for one name.
func differs(a, b Entry) bool {
	if a.Kind != b.Kind {
		return true
	}
	return a.Kind == File && (a.Attrs.Generation != b.Attrs.Generation ||
		a.Attrs.Metageneration != b.Attrs.Metageneration || a.Attrs.Size != b.Attrs.Size)
}
