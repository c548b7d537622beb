package emulator

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// Watching changes: every way an object changes passes through one of
// two points, which look at the objects a change may touch before it and
// after it and publish what differs (notifypublish.go):
//
//   - notifyMiddleware, for every request that may change objects (any
//     method but GET and HEAD): it sits inside the resumable sessions'
//     middleware, so a session's object is made by a multipart upload
//     that passes through it, and outside the folder, precondition,
//     compose and patch middleware and the fake;
//   - the Go methods that write objects (Put, Delete, PutMany), which
//     wrap their work the same way.
//
// Only buckets with notification configurations are watched, so the
// cost elsewhere is one atomic load per request. A change is read as:
// an object that appeared is OBJECT_FINALIZE; one that went is
// OBJECT_DELETE, or OBJECT_ARCHIVE in a bucket that keeps versions; a new
// generation is both (overwroteGeneration on the first,
// overwrittenByGeneration on the second); the same generation after a
// successful metadata call (PATCH or PUT of the object, its ACL calls)
// is OBJECT_METADATA_UPDATE. Two changes of one name that complete
// before either is looked at again may be seen as one (the intermediate
// generation then publishes nothing).

// watch is the state of the objects a change may touch, before it.
type watch struct {
	bucket   string
	before   map[string]*fakestorage.ObjectAttrs // nil: no live object
	prefixes []string                            // everything under these too
	meta     bool                                // a metadata call of the named objects
}

// watchObjects returns a watch of names in bucket, or nil if bucket has
// no notification configurations.
func (s *Server) watchObjects(bucket string, names ...string) *watch {
	if bucket == "" || !s.notifying(bucket) {
		return nil
	}
	w := &watch{bucket: bucket, before: make(map[string]*fakestorage.ObjectAttrs, len(names))}
	for _, n := range names {
		w.add(s, n)
	}
	return w
}

// add records the state of name, if not recorded yet.
func (w *watch) add(s *Server, name string) {
	if _, ok := w.before[name]; ok || name == "" {
		return
	}
	w.before[name] = s.liveAttrs(w.bucket, name)
}

// addPrefix records every object under prefix.
func (w *watch) addPrefix(s *Server, prefix string) {
	w.prefixes = append(w.prefixes, prefix)
	for _, a := range s.liveUnder(w.bucket, prefix) {
		w.before[a.Name] = a
	}
}

// settle compares what w recorded with the objects now, and publishes
// the difference. ok is false when the change failed, which makes a
// metadata call publish nothing. A nil w does nothing.
func (s *Server) settle(w *watch, ok bool) {
	if w == nil {
		return
	}
	after := make(map[string]*fakestorage.ObjectAttrs, len(w.before))
	for n := range w.before {
		after[n] = s.liveAttrs(w.bucket, n)
	}
	for _, p := range w.prefixes {
		for _, a := range s.liveUnder(w.bucket, p) {
			after[a.Name] = a
		}
	}
	archive := false
	if b, err := s.fake.Backend().GetBucket(w.bucket); err == nil {
		archive = b.VersioningEnabled
	}
	now := time.Now()
	names := slices.Sorted(maps.Keys(after))
	for _, n := range names {
		old, cur := w.before[n], after[n]
		switch {
		case old == nil && cur == nil:
		case old == nil:
			s.publishEvent(EventFinalize, cur, nil, now)
		case cur == nil:
			s.publishEvent(goneEvent(archive), old, nil, now)
		case old.Generation != cur.Generation:
			s.publishEvent(goneEvent(archive), old, map[string]string{"overwrittenByGeneration": strconv.FormatInt(cur.Generation, 10)}, now)
			s.publishEvent(EventFinalize, cur, map[string]string{"overwroteGeneration": strconv.FormatInt(old.Generation, 10)}, now)
		case w.meta && ok:
			s.publishEvent(EventMetadataUpdate, cur, nil, now)
		}
	}
}

// goneEvent is the event of a live version that stops being live.
func goneEvent(archive bool) string {
	if archive {
		return EventArchive
	}
	return EventDelete
}

// liveAttrs returns the attributes of the live version of bucket/name
// (in either store), or nil. Its metadata is a copy: the fake changes
// its maps in place on PATCH.
func (s *Server) liveAttrs(bucket, name string) *fakestorage.ObjectAttrs {
	if o := s.lookupSeed(bucket, name); o != nil {
		a := o.attrs(bucket)
		return &a
	}
	s.patchMu.RLock()
	defer s.patchMu.RUnlock()
	obj, err := s.fake.GetObjectStreaming(bucket, name)
	if err != nil {
		return nil
	}
	defer obj.Close()
	a := obj.ObjectAttrs
	a.Metadata = maps.Clone(a.Metadata)
	a.ACL = slices.Clone(a.ACL)
	return &a
}

// liveUnder returns the live objects of bucket whose names start with
// prefix, in both stores.
func (s *Server) liveUnder(bucket, prefix string) []*fakestorage.ObjectAttrs {
	var out []*fakestorage.ObjectAttrs
	s.seedMu.RLock()
	if t := s.seeded[bucket]; t != nil {
		t.AscendGreaterOrEqual(seedKey(prefix), func(o *seedObject) bool {
			if !strings.HasPrefix(o.name, prefix) {
				return false
			}
			a := o.attrs(bucket)
			out = append(out, &a)
			return true
		})
	}
	s.seedMu.RUnlock()
	s.patchMu.RLock()
	defer s.patchMu.RUnlock()
	objs, _, err := s.fake.ListObjectsWithOptions(bucket, fakestorage.ListOptions{Prefix: prefix})
	if err != nil {
		return out
	}
	for _, a := range objs {
		a.Metadata = maps.Clone(a.Metadata)
		a.ACL = slices.Clone(a.ACL)
		out = append(out, &a)
	}
	return out
}

// notifyMiddleware watches the objects each request that may change
// them names (see above), and answers the notificationConfigs calls
// (notifyconfig.go).
func (s *Server) notifyMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.serveNotificationConfigs(w, r) {
			return
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead || s.notify.count.Load() == 0 {
			next.ServeHTTP(w, r)
			return
		}
		watches := s.requestWatches(r)
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		ok := rec.status == 0 || rec.status/100 == 2
		for _, wt := range watches {
			s.settle(wt, ok)
		}
		if ok && r.Method == http.MethodDelete {
			if rest, found := strings.CutPrefix(strings.TrimSuffix(r.URL.EscapedPath(), "/"), jsonPrefix); found && !strings.Contains(rest, "/") {
				s.dropNotifications(unescape(rest)) // a deleted bucket's configurations go with it
			}
		}
	})
}

// requestWatches records the objects r may change, in buckets with
// notification configurations: the object of an object path (and a
// compose's sources), a copy's or rewrite's destination, an upload's
// object, everything under the folders of a folder rename.
func (s *Server) requestWatches(r *http.Request) []*watch {
	p := r.URL.EscapedPath()
	var out []*watch
	keep := func(w *watch) {
		if w != nil {
			out = append(out, w)
		}
	}
	switch {
	case strings.HasPrefix(p, jsonPrefix):
		bucketEsc, call, _ := strings.Cut(strings.TrimPrefix(p, jsonPrefix), "/")
		bucket := unescape(bucketEsc)
		if b, o, ok := rewriteDestination(r); ok {
			keep(s.watchObjects(b, o))
			break
		}
		if rest, ok := strings.CutPrefix(call, "folders/"); ok {
			src, dst, ok := strings.Cut(rest, "/renameTo/folders/")
			if w := s.watchObjects(bucket); w != nil && ok {
				w.addPrefix(s, unescape(src))
				w.addPrefix(s, unescape(dst))
				keep(w)
			}
			break
		}
		objEsc, ok := strings.CutPrefix(call, "o/")
		if !ok {
			break
		}
		objEsc, verb, _ := strings.Cut(objEsc, "/")
		w := s.watchObjects(bucket, unescape(objEsc))
		if w == nil {
			break
		}
		switch {
		case verb == "compose":
			for _, n := range composeSources(r) {
				w.add(s, n)
			}
		case verb == "":
			w.meta = r.Method == http.MethodPatch || r.Method == http.MethodPut
		case strings.HasPrefix(verb, "acl"):
			w.meta = r.Method != http.MethodGet
		}
		keep(w)
	case strings.HasPrefix(p, uploadPrefix):
		if t := classify(r); s.notifying(t.bucket) {
			keep(s.watchObjects(t.bucket, s.madeObjectName(r)))
		}
	default:
		if t := classify(r); t.object != "" {
			keep(s.watchObjects(t.bucket, t.object))
		}
	}
	return out
}
