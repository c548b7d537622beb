package main

import (
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/control"
)

func TestPrintStatusOffline(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var b strings.Builder
	printStatus(&b, control.Status{
		Bucket: "b", Started: now.Add(-time.Hour),
		Offline: true, OfflineSince: now.Add(-5 * time.Minute), OfflineCause: "connection refused",
		DirtyFiles: 2, DirtyBytes: 4096, OldestDirty: now.Add(-4 * time.Minute),
	}, now)
	for _, want := range []string{"OFFLINE since", "(5m0s)", "connection refused", "2 changed files (4.0 KiB) wait, the oldest for 4m0s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	printStatus(&b, control.Status{Bucket: "b", Started: now.Add(-time.Hour)}, now)
	if !strings.Contains(b.String(), "state:       online") {
		t.Errorf("status of an online mount:\n%s", b.String())
	}
}
