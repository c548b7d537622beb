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
		CRC32C string `json:"crc32c"`
	} `json:"destination"`
	DeleteSourceObjects bool `json:"deleteSourceObjects"`
}

// composeMiddleware does what GCS does with a compose and fake-gcs-server
// does not: a destination CRC32C (the client's Composer.SendCRC32C) that
// is not the CRC32C of the sources' concatenation is refused with 400
// before anything is written, as GCS refuses it; and deleteSourceObjects
// deletes the sources once the compose succeeded (but a source that is
// the destination).
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
		if !req.DeleteSourceObjects {
			next.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status != 0 && sw.status != http.StatusOK {
			return
		}
		for _, src := range req.SourceObjects {
			if src.Name != dst {
				_ = s.Delete(t.bucket, src.Name) // a source named twice is gone already
			}
		}
	})
}

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
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
