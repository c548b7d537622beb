package fs

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// maxNameLen is the longest file name the kernel accepts (NAME_MAX).
const maxNameLen = 255

type kind int

const (
	kindNone kind = iota // no such name (a negative entry)
	kindFile
	kindDir
)

// child is what a name in a directory is.
type child struct {
	kind  kind
	attrs transfer.ObjectAttrs // for files
}

type cachedChild struct {
	child
	expires time.Time
}

// listing is one directory level, as listed from the bucket.
type listing struct {
	children map[string]child
	names    []string // sorted
	expires  time.Time
}

// warnFunc reports an object that cannot be shown, once per name.
type warnFunc func(name, msg string, args ...any)

// metaCache remembers names and attributes for a TTL: positive and
// negative lookups, and whole directory listings. A fresh listing answers
// lookups of its children too, so 'ls -l' costs one listing, not one stat
// per file. TTL 0 disables caching.
type metaCache struct {
	b   transfer.Bucket
	ttl time.Duration

	mu    sync.Mutex
	names map[string]cachedChild // guarded by mu: full name (no trailing '/')
	dirs  map[string]*listing    // guarded by mu: prefix ("" or ending in '/')
}

func newMetaCache(b transfer.Bucket, ttl time.Duration) *metaCache {
	return &metaCache{b: b, ttl: ttl, names: map[string]cachedChild{}, dirs: map[string]*listing{}}
}

// sweepLimit bounds how many entries pile up before expired ones are dropped.
const sweepLimit = 1 << 16

// parentPrefix returns the listing prefix of the directory holding name.
func parentPrefix(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i+1]
	}
	return ""
}

// resolve says what full name (a path without a trailing '/') is: a file,
// a directory (a placeholder object or just a common prefix), or nothing.
// When both a file and a directory have the name, the directory wins.
func (m *metaCache) resolve(ctx context.Context, name string, warn warnFunc) (child, error) {
	now := time.Now()
	m.mu.Lock()
	if c, ok := m.names[name]; ok && now.Before(c.expires) {
		m.mu.Unlock()
		return c.child, nil
	}
	if l, ok := m.dirs[parentPrefix(name)]; ok && now.Before(l.expires) {
		c := l.children[name[len(parentPrefix(name)):]]
		m.mu.Unlock()
		return c, nil
	}
	m.mu.Unlock()

	// Ask for the object and for anything under name/ at the same time.
	type statResult struct {
		a   transfer.ObjectAttrs
		err error
	}
	sc := make(chan statResult, 1)
	go func() {
		a, err := m.b.Stat(ctx, name)
		sc <- statResult{a, err}
	}()
	page, lerr := m.b.List(ctx, transfer.ListQuery{Prefix: name + "/", Delimiter: "/", PageSize: 1})
	st := <-sc
	if lerr != nil {
		return child{}, lerr
	}
	if st.err != nil && !errors.Is(st.err, transfer.ErrNotExist) {
		return child{}, st.err
	}
	isDir := len(page.Objects) > 0 || len(page.Prefixes) > 0
	var c child
	switch {
	case isDir:
		if st.err == nil {
			warn(name, "object hidden: a directory has the same name", "shown_as", name+"/")
		}
		c = child{kind: kindDir}
	case st.err == nil:
		c = child{kind: kindFile, attrs: st.a}
	}
	m.put(name, c, now)
	return c, nil
}

func (m *metaCache) put(name string, c child, now time.Time) {
	if m.ttl <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.names) > sweepLimit {
		for k, v := range m.names {
			if !now.Before(v.expires) {
				delete(m.names, k)
			}
		}
	}
	m.names[name] = cachedChild{child: c, expires: now.Add(m.ttl)}
}

// list returns the directory level under prefix, from the cache while
// fresh. Objects whose names cannot be file names are left out and
// reported through warn.
func (m *metaCache) list(ctx context.Context, prefix string, warn warnFunc) (*listing, error) {
	now := time.Now()
	m.mu.Lock()
	if l, ok := m.dirs[prefix]; ok && now.Before(l.expires) {
		m.mu.Unlock()
		return l, nil
	}
	m.mu.Unlock()

	l := &listing{children: map[string]child{}}
	var files []transfer.ObjectAttrs
	q := transfer.ListQuery{Prefix: prefix, Delimiter: "/"}
	for {
		page, err := m.b.List(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, p := range page.Prefixes {
			seg := strings.TrimSuffix(p[len(prefix):], "/")
			if !validName(seg) {
				warn(p, "objects hidden: their path has a segment that is not a valid file name (empty, '.', '..' or longer than 255 bytes)")
				continue
			}
			l.children[seg] = child{kind: kindDir}
		}
		files = append(files, page.Objects...)
		if page.NextPageToken == "" {
			break
		}
		q.PageToken = page.NextPageToken
	}
	for _, a := range files {
		seg := a.Name[len(prefix):]
		switch {
		case seg == "":
			// The directory's own placeholder object.
		case !validName(seg):
			warn(a.Name, "object hidden: its name is not a valid file name (empty segment, '.', '..' or longer than 255 bytes)")
		case l.children[seg].kind == kindDir:
			warn(a.Name, "object hidden: a directory has the same name", "shown_as", a.Name+"/")
		default:
			l.children[seg] = child{kind: kindFile, attrs: a}
		}
	}
	for n := range l.children {
		l.names = append(l.names, n)
	}
	sort.Strings(l.names)
	if m.ttl > 0 {
		l.expires = now.Add(m.ttl)
		m.mu.Lock()
		if len(m.dirs) > sweepLimit/64 {
			for k, v := range m.dirs {
				if !now.Before(v.expires) {
					delete(m.dirs, k)
				}
			}
		}
		m.dirs[prefix] = l
		m.mu.Unlock()
	}
	return l, nil
}

// validName reports whether seg can be a file name on Linux.
func validName(seg string) bool {
	return seg != "" && seg != "." && seg != ".." && len(seg) <= maxNameLen &&
		!strings.ContainsAny(seg, "/\x00")
}
