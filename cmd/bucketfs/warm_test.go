package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/control"
)

func TestParseWarmArgs(t *testing.T) {
	c, err := parseWarmArgs("warm", []string{"/mnt/a", "--pin", "/mnt/b", "--parallelism", "64", "--json"})
	if err != nil || !c.pin || !c.jsonOut || c.parallelism != 64 || strings.Join(c.paths, ",") != "/mnt/a,/mnt/b" {
		t.Fatalf("parseWarmArgs = %+v, %v", c, err)
	}
	for _, args := range [][]string{{}, {"/mnt/a", "--parallelism", "0"}, {"/mnt/a", "--parallelism", "2000"}, {"/mnt/a", "--nope"}} {
		var ue *usageError
		if _, err := parseWarmArgs("warm", args); !errors.As(err, &ue) {
			t.Errorf("warm %v: %v, want a usage error", args, err)
		}
	}
	if _, err := parseWarmArgs("unpin", []string{"/mnt/a", "--pin"}); err == nil {
		t.Error("unpin took --pin")
	}
	if c, err := parseWarmArgs("unpin", []string{"--cache-dir", "/c", "a/b"}); err != nil || c.cacheDir != "/c" {
		t.Errorf("unpin --cache-dir = %+v, %v", c, err)
	}
}

func TestWarmReport(t *testing.T) {
	p := control.WarmProgress{Files: 10, TotalFiles: 20, Bytes: 10 << 20, TotalBytes: 30 << 20}
	if got := progressLine(p, 2*time.Second); got != "warming: 10/20 files, 10.0 MiB of 30.0 MiB, 5.0 MiB/s, 4s left" {
		t.Errorf("progressLine = %q", got)
	}
	r := control.WarmReport{WarmProgress: control.WarmProgress{Files: 3, TotalFiles: 3, TotalBytes: 300, Bytes: 300, AlreadyFiles: 1, AlreadyBytes: 100, Failed: 1, FailedBytes: 50},
		Errors: []control.WarmError{{Object: "d/x", Err: "gone"}}}
	var b bytes.Buffer
	err := reportWarm(&b, &warmConfig{}, r, time.Second)
	if err == nil || !strings.Contains(err.Error(), "1 of 3 files were not warmed") {
		t.Errorf("reportWarm error = %v", err)
	}
	if want := "warmed 2 of 3 files (300 B) in 1s: 1 fetched (150 B), 1 already cached (100 B)\n  failed: d/x: gone\n"; b.String() != want {
		t.Errorf("reportWarm printed %q, want %q", b.String(), want)
	}
	r.Failed = 3 // more than the report names
	b.Reset()
	reportWarm(&b, &warmConfig{}, r, time.Second)
	if !strings.HasSuffix(b.String(), "  failed: d/x: gone\n  ... and 2 more failed\n") {
		t.Errorf("reportWarm with 3 failed, 1 named, printed %q", b.String())
	}
	r.Failed, r.Errors = 0, nil
	b.Reset()
	if err := reportWarm(&b, &warmConfig{jsonOut: true, pin: true}, r, time.Second); err != nil || !strings.Contains(b.String(), `"pinned":true`) {
		t.Errorf("reportWarm --json = %v, printed %s", err, b.String())
	}
}
