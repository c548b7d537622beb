package emulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
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
// Differences from GCS, where a test could care: a folder exists here
// only while objects are under it (GCS keeps empty folders as resources),
// so renaming a folder with no object answers 404, and a destination with
// objects under it answers 409. A bucket that is not hierarchical answers
// folders.rename with 400.

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
	if len(objs) == 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("folder %q not found", src))
		return
	}
	if there, _, err := s.fake.ListObjectsWithOptions(bucket, fakestorage.ListOptions{Prefix: dst, MaxResults: 1}); err != nil || len(there) > 0 {
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
