package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/coreos/go-systemd/v22/journal"
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

// A log stream whose reader went away (stderr piped into 'head -1', a
// 'tee' stopped by Ctrl-C, a journald restart) must not stop the mount:
// Go kills a program that writes to a broken pipe on fd 1 or 2 unless
// SIGPIPE is caught, and a mount killed so never flushes its changes.
// runMount catches SIGPIPE (catchBrokenPipes), so such a write fails
// with EPIPE instead; logStream then drops every later line, and says so
// once in the journal if there is one.

// catchBrokenPipes makes a write to a broken pipe fail with EPIPE instead
// of killing the process, for the rest of its life (its last words, the
// error it exits with, go to stderr too). Programs it starts get the
// default SIGPIPE again (a caught signal is reset at exec).
func catchBrokenPipes() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}

// logStream is the mount's log output: w until a write to it fails with
// EPIPE or EIO (a closed terminal), then nothing. It is safe for concurrent use.
type logStream struct {
	w      io.Writer
	name   string           // what w is, for the note: "stderr"
	note   func(msg string) // told once when w breaks; may be nil
	broken atomic.Bool
	once   sync.Once
}

func newLogStream(w io.Writer, name string, note func(msg string)) *logStream {
	return &logStream{w: w, name: name, note: note}
}

// Write writes p to the stream, or drops it once the stream is broken.
// A dropped line is no error: the logger has nowhere better to put it.
func (s *logStream) Write(p []byte) (int, error) {
	if s.broken.Load() {
		return len(p), nil
	}
	n, err := s.w.Write(p)
	// EPIPE: a pipe whose reader went away; EIO: a terminal hung up.
	if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.EIO) {
		s.broken.Store(true)
		s.once.Do(func() {
			if s.note != nil {
				s.note(fmt.Sprintf("bucketfs (pid %d): its %s is a broken pipe or a closed terminal (whoever read it went away); log lines are dropped from now on; the mount goes on, and flushes at unmount as usual",
					os.Getpid(), s.name))
			}
		})
		return len(p), nil
	}
	return n, err
}

// journalNote writes msg to the systemd journal, if there is one: the
// other place a mount whose stderr broke can say so.
func journalNote(msg string) {
	if !journal.Enabled() {
		return
	}
	_ = journal.Send(msg, journal.PriWarning, map[string]string{"SYSLOG_IDENTIFIER": "bucketfs"})
}
