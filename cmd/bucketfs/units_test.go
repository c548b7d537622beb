package main

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Size
		err  bool
	}{
		{"4096", 4096, false},
		{"512MiB", 512 << 20, false},
		{"10GiB", 10 << 30, false},
		{"1.5GiB", 3 << 29, false},
		{"2G", 2 << 30, false},
		{"1GB", 1e9, false},
		{"64KiB", 64 << 10, false},
		{" 1 TiB ", 1 << 40, false},
		{"100B", 100, false},
		{"", 0, true},
		{"lots", 0, true},
		{"-1GiB", 0, true},
		{"1PiB", 0, true},
		{"9999999TiB", 0, true},
	} {
		got, err := ParseSize(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, error %v", c.in, got, err, c.want, c.err)
		}
	}
	if s := FormatSize(10 << 30); s != "10GiB" {
		t.Errorf("FormatSize(10GiB) = %q", s)
	}
	if s := FormatSize(1000); s != "1000" {
		t.Errorf("FormatSize(1000) = %q", s)
	}
}

func TestParseMountArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string // "" for success
	}{
		{[]string{"b-1", "/mnt"}, ""},
		{[]string{"gs://b-1/", "/mnt", "--read-only"}, ""},
		{[]string{"--anonymous", "b-1", "--cache-max-size", "1GiB", "/mnt", "--uid", "5"}, ""},
		{[]string{"b-1"}, "got 1 arguments"},
		{[]string{"b-1", "/mnt", "extra"}, "got 3 arguments"},
		{[]string{"b-1", "/mnt", "--prefetch-chunk-size", "1KiB"}, "--prefetch-chunk-size must be between"},
		{[]string{"b-1", "/mnt", "--prefetch-min-range", "4KiB"}, "--prefetch-min-range must be at least 64KiB"},
		{[]string{"b-1", "/mnt", "--prefetch-parallelism", "0"}, "--prefetch-parallelism must be between"},
		{[]string{"b-1", "/mnt", "--max-requests", "0"}, "--max-requests must be between"},
		{[]string{"b-1", "/mnt", "--metadata-ttl", "-1s"}, "--metadata-ttl must not be negative"},
		{[]string{"b-1", "/mnt", "--metadata-ttl", "soon"}, "invalid value"},
		{[]string{"b-1", "/mnt", "--metadata-max-names", "0"}, "--metadata-max-names must be at least 1"},
		{[]string{"b-1", "/mnt", "--cache-max-size", "0"}, "--cache-max-size must be more than 0"},
		{[]string{"b-1", "/mnt", "--file-mode", "1777"}, "permission bits up to 0777"},
		{[]string{"b-1", "/mnt", "--log-level", "loud"}, "--log-level must be"},
		{[]string{"UPPER", "/mnt"}, "invalid bucket name"},
		{[]string{"b-1", "/mnt", "--part-size", "4MiB"}, "--part-size must be between 5MiB and 5GiB"},
		{[]string{"b-1", "/mnt", "--part-size", "64MiB", "--part-parallelism", "4", "--parallel-upload-threshold", "1GiB"}, ""},
		{[]string{"b-1", "/mnt", "--part-parallelism", "0"}, "--part-parallelism must be between"},
		{[]string{"b-1", "/mnt", "--parallel-upload-threshold", "1KiB"}, "--parallel-upload-threshold must be at least 1MiB"},
		{[]string{"b-1", "/mnt", "--multipart-endpoint", "storage.googleapis.com"}, "--multipart-endpoint must be a URL"},
		{[]string{"b-1", "/mnt", "--multipart-endpoint", "https://storage.googleapis.com"}, ""},
	} {
		c2, err := parseMountArgs(c.args)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%q: %v", c.args, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v, want one containing %q", c.args, err, c.err)
		case c.err == "" && (c2.bucket != "b-1" || c2.mountpoint != "/mnt" || c2.cacheDir == ""):
			t.Errorf("%q: parsed %+v", c.args, c2)
		}
	}
}
