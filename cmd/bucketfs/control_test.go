package main

import (
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/control"
)

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 550: "550 B", 1536: "1.5 KiB", 10 << 30: "10.0 GiB", 3 << 40: "3.0 TiB"} {
		if got := humanSize(n); got != want {
			t.Errorf("humanSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestPrintStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var b strings.Builder
	printStatus(&b, control.Status{
		Version: "v1", Bucket: "b", Started: now.Add(-time.Hour),
		DirtyFiles: 3, DirtyBytes: 2048, OldestDirty: now.Add(-90 * time.Second),
		Dirty:  []control.DirtyFile{{Name: "x", Size: 2048, Since: now.Add(-90 * time.Second), Uploading: true}},
		Errors: []control.ErrorEvent{{Time: now, Op: "upload", Object: "x", Err: "refused"}},
	}, now)
	for _, want := range []string{"up 1h0m0s", "gs://b", "3 files (2.0 KiB) not in the bucket yet, the oldest for 1m30s",
		"x  (uploading)", "... and 2 more", "upload   x: refused"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
}

func TestParseControlArgs(t *testing.T) {
	c, err := parseControlArgs("flush", []string{"/mnt", "--timeout", "5s"})
	if err != nil || c.mountpoint != "/mnt" || c.timeout != 5*time.Second {
		t.Errorf("flush /mnt --timeout 5s: %+v, %v", c, err)
	}
	if _, err := parseControlArgs("status", []string{"a", "b"}); err == nil {
		t.Error("status with two mountpoints accepted")
	}
	if c, err := parseControlArgs("status", []string{"--cache-dir", "/c", "--json"}); err != nil || c.cacheDir != "/c" || !c.jsonOut {
		t.Errorf("status --cache-dir /c --json: %+v, %v", c, err)
	}
}
