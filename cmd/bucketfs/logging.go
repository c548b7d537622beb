package main

import (
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
)

// newLogger makes the logger of the mount: text (key=value) or JSON lines
// on w, at level and above. Credentials never reach the log: attributes
// whose name says they hold one are replaced, and so are bearer tokens,
// access tokens in URLs and URL passwords found in any message or value.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level must be debug, info, warn or error, got %q", level)
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: redactAttr}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
}

const redacted = "[REDACTED]"

// secretKeys are parts of attribute names whose values are never logged.
var secretKeys = []string{"token", "secret", "password", "passwd", "credential", "authorization", "private_key", "api_key"}

func redactAttr(_ []string, a slog.Attr) slog.Attr {
	k := strings.ToLower(a.Key)
	for _, s := range secretKeys {
		if strings.Contains(k, s) {
			return slog.String(a.Key, redacted)
		}
	}
	switch v := a.Value.Resolve(); v.Kind() {
	case slog.KindString:
		if s := redactString(v.String()); s != v.String() {
			return slog.String(a.Key, s)
		}
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			if s := redactString(err.Error()); s != err.Error() {
				return slog.String(a.Key, s)
			}
		}
	}
	return a
}

var (
	bearerRE   = regexp.MustCompile(`(?i)(bearer\s+)[^\s"',]+`)
	urlTokenRE = regexp.MustCompile(`(?i)((?:access_token|token|key|signature|x-goog-signature|x-goog-credential)=)[^&\s"']+`)
	urlPassRE  = regexp.MustCompile(`(://[^/\s:@"']+:)[^@/\s"']+@`)
)

// redactString removes what looks like a credential from s.
func redactString(s string) string {
	s = bearerRE.ReplaceAllString(s, "${1}"+redacted)
	s = urlTokenRE.ReplaceAllString(s, "${1}"+redacted)
	return urlPassRE.ReplaceAllString(s, "${1}"+redacted+"@")
}
