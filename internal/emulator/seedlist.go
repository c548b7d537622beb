package emulator

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// maxListPage is the most entries (objects and prefixes together) one
// page of a listing holds, and the page size when the request names
// none, as GCS documents for objects.list.
const maxListPage = 1000

// listQuery is what objects.list asks.
type listQuery struct {
	prefix, delimiter, startOffset, endOffset string
	trailing, versions                        bool
	max                                       int
	fields                                    []string // the items' fields the request selects; nil: all
	from                                      string   // where the page starts
	fromIncl                                  bool     // whether from itself is on it
}

// listPage is objects.list's answer.
type listPage struct {
	Kind          string   `json:"kind"`
	Items         []any    `json:"items,omitempty"`
	Prefixes      []string `json:"prefixes,omitempty"`
	NextPageToken string   `json:"nextPageToken,omitempty"`
}

// listSeeded answers objects.list in a seeded bucket from both stores,
// merged in name order: O(log n) per entry of the page, plus the objects
// the fake holds under the prefix. Unlike the fake's own listing (every
// object in one page unless maxResults is given, and every prefix in
// every page), pages are as GCS makes them: at most maxResults (at most
// 1000, 1000 if not given) objects and prefixes together, each entry on
// one page only, with an opaque page token.
func (s *Server) listSeeded(w http.ResponseWriter, r *http.Request, bucket string) {
	q, err := parseListQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.seedMu.RLock()
	s.patchMu.RLock()
	page, ok := s.listPageLocked(bucket, q)
	s.patchMu.RUnlock()
	s.seedMu.RUnlock()
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeFakeJSON(w, page)
}

// parseListQuery reads r's listing parameters.
func parseListQuery(r *http.Request) (listQuery, error) {
	v := r.URL.Query()
	q := listQuery{
		prefix: v.Get("prefix"), delimiter: v.Get("delimiter"),
		startOffset: v.Get("startOffset"), endOffset: v.Get("endOffset"),
		trailing: v.Get("includeTrailingDelimiter") == "true", versions: v.Get("versions") == "true",
		max: maxListPage, fromIncl: true, fields: itemFields(v.Get("fields")),
	}
	if m := v.Get("maxResults"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 0 {
			return q, fmt.Errorf("invalid value for maxResults: %q", m)
		}
		if n > 0 && n < maxListPage {
			q.max = n
		}
	}
	q.from = max(q.prefix, q.startOffset)
	if t := v.Get("pageToken"); t != "" {
		raw, err := base64.RawURLEncoding.DecodeString(t)
		if err != nil || len(raw) == 0 {
			return q, fmt.Errorf("invalid page token %q", t)
		}
		kind, name := raw[0], string(raw[1:])
		switch {
		case kind == 'o':
			q.from, q.fromIncl = name, false
		case kind == 'p':
			next, ok := successor(name)
			if !ok {
				q.from, q.fromIncl = name, false // nothing is after it; an empty page
			} else {
				q.from = next
			}
		default:
			return q, fmt.Errorf("invalid page token %q", t)
		}
	}
	return q, nil
}

// pageToken is the token of a page that goes on after the object (kind
// 'o') or prefix ('p') name.
func pageToken(kind byte, name string) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{kind}, name...))
}

// successor returns the least string greater than every string that
// starts with s; ok is false if there is none (s is all 0xff bytes).
func successor(s string) (string, bool) {
	b := []byte(s)
	for len(b) > 0 && b[len(b)-1] == 0xff {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return "", false
	}
	b[len(b)-1]++
	return string(b), true
}

// listEntry is the next name of a listing: the seeded object of that name
// or the fake's versions of it (fake[lo:hi]).
type listEntry struct {
	name   string
	seeded *seedObject
	lo, hi int
}

// listCursor finds the next name at or after a point in both stores.
type listCursor struct {
	seeded *seedTree
	fake   []fakestorage.ObjectAttrs // sorted by name
}

// next returns the least entry whose name is from (if incl) or greater.
func (c listCursor) next(from string, incl bool) (listEntry, bool) {
	var sd *seedObject
	if c.seeded != nil {
		c.seeded.AscendGreaterOrEqual(seedKey(from), func(o *seedObject) bool {
			if !incl && o.name == from {
				return true
			}
			sd = o
			return false
		})
	}
	lo := sort.Search(len(c.fake), func(i int) bool {
		n := c.fake[i].Name
		return n > from || (incl && n == from)
	})
	if lo < len(c.fake) && (sd == nil || c.fake[lo].Name <= sd.name) {
		// The fake wins a tie (a name is in one store only; this is
		// a guard).
		hi := lo + 1
		for hi < len(c.fake) && c.fake[hi].Name == c.fake[lo].Name {
			hi++
		}
		return listEntry{name: c.fake[lo].Name, lo: lo, hi: hi}, true
	}
	if sd != nil {
		return listEntry{name: sd.name, seeded: sd}, true
	}
	return listEntry{}, false
}

// listPageLocked makes one page of q's listing of bucket; ok is false if
// the bucket does not exist. The caller holds seedMu and patchMu (read).
func (s *Server) listPageLocked(bucket string, q listQuery) (listPage, bool) {
	fake, err := s.fake.ListObjectsWithOptionsPaginated(bucket, fakestorage.ListOptions{Prefix: q.prefix, Versions: q.versions})
	if err != nil {
		return listPage{}, false
	}
	c := listCursor{seeded: s.seeded[bucket], fake: fake.Objects}
	page := listPage{Kind: "storage#objects"}
	item := func(a fakestorage.ObjectAttrs) any {
		if q.fields == nil {
			return objectJSON(a, s.url)
		}
		return selectFields(a, s.url, q.fields)
	}
	add := func(e listEntry) {
		if e.seeded != nil {
			page.Items = append(page.Items, item(e.seeded.attrs(bucket)))
		}
		for _, a := range c.fake[e.lo:e.hi] {
			page.Items = append(page.Items, item(a))
		}
	}
	from, incl, count := q.from, q.fromIncl, 0
	var lastKind byte
	var last string
	for {
		e, ok := c.next(from, incl)
		if !ok || !strings.HasPrefix(e.name, q.prefix) || (q.endOffset != "" && e.name >= q.endOffset) {
			return page, true
		}
		if count == q.max {
			page.NextPageToken = pageToken(lastKind, last)
			return page, true
		}
		count++
		if i := strings.Index(e.name[len(q.prefix):], q.delimiter); q.delimiter != "" && i >= 0 {
			p := e.name[:len(q.prefix)+i+len(q.delimiter)]
			page.Prefixes = append(page.Prefixes, p)
			if q.trailing && e.name == p {
				add(e)
			}
			lastKind, last = 'p', p
			if from, ok = successor(p); !ok {
				return page, true
			}
			incl = true
			continue
		}
		add(e)
		lastKind, last = 'o', e.name
		from, incl = e.name, false
	}
}

// itemFields returns the fields of items a "fields" parameter selects
// (as the official client sends it with Query.SetAttrSelection:
// "nextPageToken,prefixes,items(name,size)"), nil if it selects none in
// particular.
func itemFields(fields string) []string {
	_, rest, ok := strings.Cut(fields, "items(")
	if !ok {
		return nil
	}
	sel, _, ok := strings.Cut(rest, ")")
	if !ok {
		return nil
	}
	return strings.Split(sel, ",")
}

// selectFields returns the fields of a (rendered as objectJSON renders
// them) that fields names, as GCS answers a partial response; a field
// without a value is left out. Only the selected fields are rendered: a
// listing of names alone costs little.
func selectFields(a fakestorage.ObjectAttrs, externalURL string, fields []string) map[string]any {
	m := make(map[string]any, len(fields))
	for _, f := range fields {
		var v any
		switch f {
		case "kind":
			v = "storage#object"
		case "name":
			v = a.Name
		case "id":
			v = a.BucketName + "/" + a.Name
		case "bucket":
			v = a.BucketName
		case "size":
			v = strconv.FormatInt(a.Size, 10)
		case "generation":
			v = strconv.FormatInt(a.Generation, 10)
		case "metageneration":
			v = "1"
		case "contentType":
			v = a.ContentType
		case "contentEncoding":
			v = a.ContentEncoding
		case "crc32c":
			v = a.Crc32c
		case "md5Hash":
			v = a.Md5Hash
		case "etag":
			v = a.Etag
		case "updated":
			v = apiTime(a.Updated)
		case "metadata":
			if len(a.Metadata) > 0 {
				v = maps.Clone(a.Metadata)
			}
		default:
			// A field rendered rarely: take it from the whole object.
			full, _ := json.Marshal(objectJSON(a, externalURL))
			var all map[string]any
			_ = json.Unmarshal(full, &all)
			v = all[f]
		}
		if v != nil && v != "" {
			m[f] = v
		}
	}
	return m
}
