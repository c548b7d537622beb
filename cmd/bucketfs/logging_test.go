package main

import (
	"bytes"
	"encoding/json"
	"errors"
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
