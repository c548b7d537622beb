package emulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// Hierarchical namespace. fake-gcs-server has no folders; the emulator
// adds what bucketfs uses of them, as documented by GCS (it is not tested
// against the real service, which no emulator here implements):
//
//   - buckets.get of a bucket made hierarchical (SetHierarchical) says
//     "hierarchicalNamespace": {"enabled": true};
//   - folders.rename (POST .../b/B/folders/SRC/renameTo/folders/DST)
//     moves every object under SRC to DST atomically: it runs alone, with
//     no other request of the emulator in between. Moved objects keep
//     their content, checksums and metadata and get a new generation, as
//     objects.move documents. It answers with a long-running operation
//     that is not done yet, so that a client polls;
//   - operations.get (GET .../b/B/operations/ID) answers it done.
//
//   - folders are resources: every folder above an object exists, and
//     stays, empty, when its last object is deleted (through the JSON API
//     or Server.Delete); folders.list lists them, folders.delete deletes
//     an empty one (409 if it holds an object or a folder), and
//     Server.Folders shows them to a test.
//
// Differences from GCS, where a test could care: folders.insert is not
// there (folders come from objects); a folder's metadata is its name;
// listings are one page; folders.rename to a destination that exists
// answers 409. A bucket that is not hierarchical answers the folder calls
// with 400.

// SetHierarchical makes bucket one with a hierarchical namespace (on), or
// a flat one.
func (s *Server) SetHierarchical(bucket string, on bool) {
	s.hnsMu.Lock()
	defer s.hnsMu.Unlock()
	if on {
		s.hns[bucket] = true
	} else {
		delete(s.hns, bucket)
	}
}

// FolderRenames returns how many folder renames the emulator made.
func (s *Server) FolderRenames() int64 { return s.folderRenames.Load() }

func (s *Server) hierarchical(bucket string) bool {
	s.hnsMu.Lock()
	defer s.hnsMu.Unlock()
	return s.hns[bucket]
}

// folderMiddleware answers the folder and operation calls, and adds the
// hierarchical namespace to buckets.get.
func (s *Server) folderMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.EscapedPath(), jsonPrefix)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		bucketEsc, call, _ := strings.Cut(rest, "/")
		bucket := unescape(bucketEsc)
		switch {
		case r.Method == http.MethodGet && call == "" && s.hierarchical(bucket):
			s.bucketWithHNS(w, r, next)
		case r.Method == http.MethodDelete && strings.HasPrefix(call, "o/") && s.hierarchical(bucket):
			rec := &statusRecorder{ResponseWriter: w}
			next.ServeHTTP(rec, r)
			if rec.status/100 == 2 || rec.status == 0 {
				s.keepFolders(bucket, unescape(strings.TrimPrefix(call, "o/")))
			}
		case r.Method == http.MethodGet && call == "folders":
			s.listFolders(w, bucket, r.URL.Query().Get("prefix"))
		case r.Method == http.MethodDelete && strings.HasPrefix(call, "folders/"):
			s.deleteFolder(w, bucket, unescape(strings.TrimPrefix(call, "folders/")))
		case r.Method == http.MethodPost && strings.HasPrefix(call, "folders/"):
			src, dst, ok := strings.Cut(strings.TrimPrefix(call, "folders/"), "/renameTo/folders/")
			if !ok {
				writeError(w, http.StatusBadRequest, "emulator: unknown folders call")
				return
			}
			s.renameFolder(w, bucket, unescape(src), unescape(dst))
		case r.Method == http.MethodGet && strings.HasPrefix(call, "operations/"):
			s.getOperation(w, bucket, unescape(strings.TrimPrefix(call, "operations/")))
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// bucketWithHNS answers buckets.get with the fake's answer plus the
// hierarchical namespace.
func (s *Server) bucketWithHNS(w http.ResponseWriter, r *http.Request, next http.Handler) {
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r)
	var body map[string]any
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &body) != nil {
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return
	}
	body["hierarchicalNamespace"] = map[string]any{"enabled": true}
	writeJSON(w, body)
}

// statusRecorder remembers the status a handler answered with.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// folderNames returns the folders that object name is in: every prefix of
// it that ends in '/' (a name ending in '/' is in the folder of that name).
func folderNames(name string) []string {
	var out []string
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			out = append(out, name[:i+1])
		}
	}
	return out
}

// keepFolders records that the folders object name was in stay, now that
// it is gone.
func (s *Server) keepFolders(bucket, name string) {
	s.hnsMu.Lock()
	defer s.hnsMu.Unlock()
	if !s.hns[bucket] {
		return
	}
	set := s.kept[bucket]
	if set == nil {
		set = map[string]bool{}
		s.kept[bucket] = set
	}
	for _, f := range folderNames(name) {
		set[f] = true
	}
}

// Folders returns every folder of bucket (if it is hierarchical), sorted.
func (s *Server) Folders(bucket string) []string {
	s.patchMu.RLock()
	defer s.patchMu.RUnlock()
	return s.foldersLocked(bucket, "")
}

// foldersLocked lists the folders under prefix (itself included): those
// kept and those of objects. The caller holds patchMu.
func (s *Server) foldersLocked(bucket, prefix string) []string {
	set := map[string]bool{}
	s.hnsMu.Lock()
	for f := range s.kept[bucket] {
		set[f] = true
	}
	s.hnsMu.Unlock()
	objs, _, _ := s.fake.ListObjectsWithOptions(bucket, fakestorage.ListOptions{Prefix: prefix})
	for _, o := range objs {
		for _, f := range folderNames(o.Name) {
			set[f] = true
		}
	}
	var out []string
	for f := range set {
		if strings.HasPrefix(f, prefix) {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

func (s *Server) listFolders(w http.ResponseWriter, bucket, prefix string) {
	if !s.hierarchical(bucket) {
		writeError(w, http.StatusBadRequest, "The bucket does not have hierarchical namespace enabled.")
		return
	}
	s.patchMu.RLock()
	names := s.foldersLocked(bucket, prefix)
	s.patchMu.RUnlock()
	items := []map[string]any{}
	for _, f := range names {
		items = append(items, map[string]any{"kind": "storage#folder", "bucket": bucket, "name": f, "id": bucket + "/" + f})
	}
	writeJSON(w, map[string]any{"kind": "storage#folders", "items": items})
}

func (s *Server) deleteFolder(w http.ResponseWriter, bucket, name string) {
	if !s.hierarchical(bucket) {
		writeError(w, http.StatusBadRequest, "The bucket does not have hierarchical namespace enabled.")
		return
	}
	s.guardMu.Lock()
	defer s.guardMu.Unlock()
	s.patchMu.Lock()
	defer s.patchMu.Unlock()
	under := s.foldersLocked(bucket, name)
	if len(under) == 0 || under[0] != name {
		writeError(w, http.StatusNotFound, fmt.Sprintf("folder %q not found", name))
		return
	}
	objs, _, _ := s.fake.ListObjectsWithOptions(bucket, fakestorage.ListOptions{Prefix: name, MaxResults: 1})
	if len(objs) > 0 || len(under) > 1 {
		writeError(w, http.StatusConflict, fmt.Sprintf("folder %q is not empty", name))
		return
	}
	s.hnsMu.Lock()
	delete(s.kept[bucket], name)
	s.hnsMu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// folderOp is the long-running operation of a folder rename.
type folderOp struct {
	bucket, src, dst string
}

func (s *Server) renameFolder(w http.ResponseWriter, bucket, src, dst string) {
	switch {
	case !s.bucketExists(bucket):
		writeError(w, http.StatusNotFound, fmt.Sprintf("bucket %q not found", bucket))
		return
	case !s.hierarchical(bucket):
		writeError(w, http.StatusBadRequest, "The bucket does not have hierarchical namespace enabled.")
		return
	case !strings.HasSuffix(src, "/") || !strings.HasSuffix(dst, "/") || strings.HasPrefix(dst, src) || strings.HasPrefix(src, dst):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid folder rename %q to %q", src, dst))
		return
	}
	// Alone: no other request sees half of it.
	s.guardMu.Lock()
	defer s.guardMu.Unlock()
	s.patchMu.Lock()
	defer s.patchMu.Unlock()
	objs, _, err := s.fake.ListObjectsWithOptions(bucket, fakestorage.ListOptions{Prefix: src})
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if f := s.foldersLocked(bucket, src); len(f) == 0 || f[0] != src {
		writeError(w, http.StatusNotFound, fmt.Sprintf("folder %q not found", src))
		return
	}
	if f := s.foldersLocked(bucket, dst); len(f) > 0 && f[0] == dst {
		writeError(w, http.StatusConflict, fmt.Sprintf("folder %q already exists", dst))
		return
	}
	for _, a := range objs {
		obj, err := s.fake.GetObject(bucket, a.Name)
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		moved := obj
		moved.Name = dst + a.Name[len(src):]
		moved.Created, moved.Updated = time.Time{}, time.Time{}
		s.putMu.Lock()
		moved.Generation = s.nextGenerationLocked(0)
		err = s.fake.CreateObjectStreaming(moved.StreamingObject())
		s.putMu.Unlock()
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		if err := s.fake.Backend().DeleteObject(bucket, a.Name); err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	// The folders under src move with it; those above it stay.
	s.hnsMu.Lock()
	set := s.kept[bucket]
	if set == nil {
		set = map[string]bool{}
		s.kept[bucket] = set
	}
	for f := range set {
		if strings.HasPrefix(f, src) {
			delete(set, f)
			set[dst+f[len(src):]] = true
		}
	}
	for _, f := range folderNames(src) {
		if f != src {
			set[f] = true
		}
	}
	s.hnsMu.Unlock()
	s.folderRenames.Add(1)
	id := fmt.Sprintf("rename-%d", s.opSeq.Add(1))
	s.opsMu.Lock()
	s.ops[id] = folderOp{bucket: bucket, src: src, dst: dst}
	s.opsMu.Unlock()
	writeJSON(w, operationJSON(bucket, id, false))
}

func (s *Server) getOperation(w http.ResponseWriter, bucket, id string) {
	s.opsMu.Lock()
	op, ok := s.ops[id]
	s.opsMu.Unlock()
	if !ok || op.bucket != bucket {
		writeError(w, http.StatusNotFound, fmt.Sprintf("operation %q not found", id))
		return
	}
	writeJSON(w, operationJSON(bucket, id, true))
}

func operationJSON(bucket, id string, done bool) map[string]any {
	op := map[string]any{
		"kind":     "storage#operation",
		"name":     "projects/_/buckets/" + bucket + "/operations/" + id,
		"done":     done,
		"metadata": map[string]any{"@type": "type.googleapis.com/google.storage.control.v2.RenameFolderMetadata"},
	}
	if done {
		op["response"] = map[string]any{"@type": "type.googleapis.com/google.storage.control.v2.Folder"}
	}
	return op
}

func writeJSON(w http.ResponseWriter, v any) {
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(v)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_, _ = w.Write(buf.Bytes())
}
