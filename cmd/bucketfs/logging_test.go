package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

func TestLoggerFormatsAndRedaction(t *testing.T) {
	secrets := []string{"ya29.s3cret", "hunter2", "tok-123", "sig-456"}
	for _, format := range []string{"text", "json"} {
		var b bytes.Buffer
		log, err := newLogger(&b, "debug", format)
		if err != nil {
			t.Fatal(err)
		}
		log.Debug("request failed: Authorization: Bearer ya29.s3cret",
			"access_token", "tok-123",
			"endpoint", "https://user:hunter2@example.com/storage/v1",
			"err", errors.New("GET https://storage.googleapis.com/b/o?X-Goog-Signature=sig-456&alt=media: 403"),
			"object", "a/b.txt")
		out := b.String()
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s log shows %q:\n%s", format, s, out)
			}
		}
		for _, keep := range []string{"a/b.txt", "example.com/storage/v1", "alt=media", "level=DEBUG"} {
			if format == "json" && keep == "level=DEBUG" {
				keep = `"level":"DEBUG"`
			}
			if !strings.Contains(out, keep) {
				t.Errorf("%s log lost %q:\n%s", format, keep, out)
			}
		}
		if format == "json" {
			var m map[string]any
			if err := json.Unmarshal(b.Bytes(), &m); err != nil {
				t.Errorf("json log is not one JSON object: %v\n%s", err, out)
			}
		}
	}
	var b bytes.Buffer
	log, _ := newLogger(&b, "warn", "text")
	log.Info("hidden")
	if b.Len() != 0 {
		t.Errorf("info logged at level warn: %s", b.String())
	}
	if _, err := newLogger(&b, "loud", "text"); err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("bad level: %v", err)
	}
	if _, err := newLogger(&b, "info", "xml"); err == nil || !strings.Contains(err.Error(), "--log-format") {
		t.Errorf("bad format: %v", err)
	}
}

// countingWriter counts the writes that reach w.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) { c.n++; return c.w.Write(p) }

// A log stream whose reader went away drops its lines without an error,
// stops writing to it, and notes it once elsewhere.
func TestLogStreamBrokenPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cw := &countingWriter{w: w}
	var notes []string
	log, err := newLogger(newLogStream(cw, "stderr", func(m string) { notes = append(notes, m) }), "info", "text")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("before")
	buf := make([]byte, 100)
	if n, err := r.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "before") {
		t.Fatalf("first line: %q, %v", buf[:n], err)
	}
	r.Close()
	s := newLogStream(cw, "stderr", func(m string) { notes = append(notes, m) })
	for range 3 {
		if n, err := s.Write([]byte("x\n")); n != 2 || err != nil {
			t.Fatalf("write to a broken stream: %d, %v; want 2, nil", n, err)
		}
		log.Info("after")
	}
	if cw.n != 3 {
		t.Errorf("%d writes reached the pipe, want 3 (one before it broke, one for each stream after)", cw.n)
	}
	if len(notes) != 2 || !strings.Contains(notes[0], "broken pipe") {
		t.Errorf("notes %q, want one per stream saying the pipe broke", notes)
	}
}
