package emulator

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/bucketfs/bucketfs/internal/crc32c"
)

// maxComposeBody bounds how much of a compose request is read.
const maxComposeBody = 1 << 20

// composeRequest is what composeMiddleware reads of an objects.compose
// body (the JSON API's ComposeRequest).
type composeRequest struct {
	SourceObjects []struct {
		Name string `json:"name"`
	} `json:"sourceObjects"`
	Destination struct {
		CRC32C          string `json:"crc32c"`
		ContentType     string `json:"contentType"`
		ContentEncoding string `json:"contentEncoding"`
	} `json:"destination"`
	DeleteSourceObjects bool `json:"deleteSourceObjects"`
}

// composeMiddleware does what GCS does with a compose and fake-gcs-server
// does not: a destination CRC32C (the client's Composer.SendCRC32C) that
// is not the CRC32C of the sources' concatenation is refused with 400
// before anything is written, as GCS refuses it; deleteSourceObjects
// deletes the sources once the compose succeeded (but a source that is
// the destination); and a compose over an existing object makes a new
// object with the request's attributes alone, as GCS does, where the
// fake keeps the old object's content type and encoding (they are set
// again on the composed version, in place, and in the answer; a
// destination that is also a source is left to the fake).
func (s *Server) composeMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := classify(r)
		dst, isCompose := strings.CutSuffix(t.object, "/compose")
		if r.Method != http.MethodPost || !isCompose || t.bucket == "" ||
			!strings.HasPrefix(r.URL.EscapedPath(), jsonPrefix) {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxComposeBody))
		if err != nil {
			writeError(w, http.StatusBadRequest, "reading the compose request: "+err.Error())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req composeRequest
		if err := json.Unmarshal(body, &req); err != nil {
			next.ServeHTTP(w, r) // the fake says what is wrong with it
			return
		}
		if req.Destination.CRC32C != "" {
			if msg := s.composeCRCMismatch(t.bucket, dst, req); msg != "" {
				writeError(w, http.StatusBadRequest, msg)
				return
			}
		}
		bw := &bufferedWriter{header: http.Header{}, status: http.StatusOK}
		replaced := s.overwrites(t.bucket, dst, req)
		next.ServeHTTP(bw, r)
		if bw.status == http.StatusOK && replaced {
			bw.body = s.resetComposedAttrs(t.bucket, dst, req, bw.body)
		}
		for k, v := range bw.header {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(bw.status)
		_, _ = w.Write(bw.body)
		if bw.status != http.StatusOK || !req.DeleteSourceObjects {
			return
		}
		for _, src := range req.SourceObjects {
			if src.Name != dst {
				_ = s.Delete(t.bucket, src.Name) // a source named twice is gone already
			}
		}
	})
}

// bufferedWriter keeps a handler's answer, to be changed before it is
// sent.
type bufferedWriter struct {
	header http.Header
	status int
	body   []byte
	wrote  bool
}

func (w *bufferedWriter) Header() http.Header { return w.header }

func (w *bufferedWriter) WriteHeader(status int) {
	if !w.wrote {
		w.status, w.wrote = status, true
	}
}

func (w *bufferedWriter) Write(p []byte) (int, error) {
	w.wrote = true
	w.body = append(w.body, p...)
	return len(p), nil
}

// overwrites reports whether a compose of req replaces an existing dst
// that is none of its sources.
func (s *Server) overwrites(bucket, dst string, req composeRequest) bool {
	for _, src := range req.SourceObjects {
		if src.Name == dst {
			return false
		}
	}
	_, err := s.Generation(bucket, dst)
	return err == nil
}

// resetComposedAttrs gives the composed dst the content type and encoding
// of req (the fake kept the replaced object's), in place, and returns
// the fake's answer body with them.
func (s *Server) resetComposedAttrs(bucket, dst string, req composeRequest, body []byte) []byte {
	o, err := s.Object(bucket, dst)
	if err != nil {
		return body
	}
	o.ContentType, o.ContentEncoding = req.Destination.ContentType, req.Destination.ContentEncoding
	s.patchMu.Lock()
	err = s.fake.CreateObjectStreaming(o.StreamingObject()) // same generation: in place
	s.patchMu.Unlock()
	if err != nil {
		return body
	}
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	for k, v := range map[string]string{"contentType": o.ContentType, "contentEncoding": o.ContentEncoding} {
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	if out, err := json.Marshal(m); err == nil {
		return out
	}
	return body
}

// composeCRCMismatch returns why req's destination CRC32C is refused, or
// "" if it is the sources' (or a source is missing: the fake says so).
func (s *Server) composeCRCMismatch(bucket, dst string, req composeRequest) string {
	raw, err := base64.StdEncoding.DecodeString(req.Destination.CRC32C)
	if err != nil || len(raw) != 4 {
		return fmt.Sprintf("invalid crc32c %q", req.Destination.CRC32C)
	}
	want := binary.BigEndian.Uint32(raw)
	var got uint32
	for _, src := range req.SourceObjects {
		o, err := s.Object(bucket, src.Name)
		if err != nil {
			return ""
		}
		got = crc32c.Update(got, o.Content)
	}
	if got != want {
		return fmt.Sprintf("Provided CRC32C %q doesn't match calculated CRC32C for the composed object %s (%08x, given %08x)", req.Destination.CRC32C, dst, got, want)
	}
	return ""
}
