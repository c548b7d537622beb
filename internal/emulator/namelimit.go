package emulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
)

// MaxObjectName is the longest object name GCS takes, in bytes of UTF-8.
const MaxObjectName = 1024

// peekLimit bounds how much of an upload's body nameLimitMiddleware reads
// to find the object's name in its metadata (the first part of a
// multipart upload, or the JSON body that starts a resumable one).
const peekLimit = 64 << 10

// nameLimitMiddleware answers 400, as GCS does, to a call that would make
// an object whose name is longer than MaxObjectName: an upload (the name
// in the query or in the metadata at the start of the body), a copy or
// rewrite (its destination), a compose (its destination). The fake takes
// any length.
func (s *Server) nameLimitMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name := s.madeObjectName(r); len(name) > MaxObjectName {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("The object name is too long: %d bytes, at most %d", len(name), MaxObjectName))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// madeObjectName returns the name of the object r would make, or "" if
// r makes none (or it cannot tell). An upload's body it reads from is
// put back for the handlers after it.
func (s *Server) madeObjectName(r *http.Request) string {
	if r.Method != http.MethodPost && r.Method != http.MethodPut {
		return ""
	}
	if _, dst, ok := rewriteDestination(r); ok {
		return dst
	}
	p := r.URL.EscapedPath()
	if strings.HasPrefix(p, jsonPrefix) {
		if name, ok := strings.CutSuffix(classify(r).object, "/compose"); ok {
			return name
		}
		return ""
	}
	if !strings.HasPrefix(p, uploadPrefix) {
		if r.Method == http.MethodPut {
			return classify(r).object // the XML API: PUT /BUCKET/OBJECT
		}
		return ""
	}
	if name := r.URL.Query().Get("name"); name != "" {
		return name
	}
	head := make([]byte, peekLimit)
	n, _ := io.ReadFull(r.Body, head)
	head = head[:n]
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	return uploadMetadataName(r.Header.Get("Content-Type"), head)
}

// uploadMetadataName reads the object's name from the start of an
// upload's body: the JSON metadata that is its first part (multipart) or
// all of it (the request that starts a resumable upload).
func uploadMetadataName(contentType string, head []byte) string {
	var meta struct {
		Name string `json:"name"`
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err == nil && strings.HasPrefix(mt, "multipart/") {
		part, err := multipart.NewReader(bytes.NewReader(head), params["boundary"]).NextPart()
		if err != nil {
			return ""
		}
		_ = json.NewDecoder(part).Decode(&meta)
		return meta.Name
	}
	_ = json.Unmarshal(head, &meta)
	return meta.Name
}
