package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestHelperOptions(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    []string // arguments of 'bucketfs mount'
		logFile string
		err     string
	}{
		{
			name: "fstab line",
			args: []string{"gs://my-bucket", "/mnt/data", "-o", "rw,_netdev,nofail,noauto,user,x-systemd.automount,nosuid,nodev,cache_dir=/var/cache/b,cache-max-size=50GiB,anonymous"},
			want: []string{"--read-only=false", "--cache-dir=/var/cache/b", "--cache-max-size=50GiB", "--anonymous", "gs://my-bucket", "/mnt/data"},
		},
		{
			name: "ro, noexec, bool with a value, log file, several -o",
			args: []string{"-n", "b", "/m", "-o", "ro,noexec", "-oallow_other=false", "-o", "log_file=/var/log/b.log,uid=1000"},
			want: []string{"--read-only=true", "--noexec", "--allow-other=false", "--uid=1000", "b", "/m"}, logFile: "/var/log/b.log",
		},
		{name: "relative paths made absolute", args: []string{"b", "/m", "-o", "cache_dir=c,config=/etc/b.yaml,log_file=l.log"},
			want: []string{"--cache-dir=" + abs("c"), "--config=/etc/b.yaml", "b", "/m"}, logFile: abs("l.log")},
		{name: "mount.fuse3 adds -t", args: []string{"b", "/m", "-t", "fuse.bucketfs", "-o", "dev,suid"}, want: []string{"b", "/m"}},
		{name: "sloppy ignores unknown options", args: []string{"-s", "b", "/m", "-o", "frobnicate,anonymous"}, want: []string{"--anonymous", "b", "/m"}},
		{name: "unknown option", args: []string{"b", "/m", "-o", "frobnicate"}, err: `unknown option "frobnicate"`},
		{name: "value missing", args: []string{"b", "/m", "-o", "cache_dir"}, err: "option cache_dir needs a value"},
		{name: "log_file without path", args: []string{"b", "/m", "-o", "log_file="}, err: "log_file needs a path"},
		{name: "one argument", args: []string{"b"}, err: "got 1 arguments"},
		{name: "namespace", args: []string{"b", "/m", "-N", "1234"}, err: "-N"},
		{name: "bad flag", args: []string{"-x", "b", "/m"}, err: "unknown flag -x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, err := parseHelperArgs(c.args)
			var got []string
			var logFile string
			if err == nil {
				got, logFile, err = h.mountArgs(func(string) {})
			}
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) || logFile != c.logFile {
				t.Errorf("got %q, log %q; want %q, log %q", got, logFile, c.want, c.logFile)
			}
		})
	}
}

func TestIsHelperCall(t *testing.T) {
	for _, c := range []struct {
		argv0 string
		args  []string
		want  bool
	}{
		{"/sbin/mount.fuse.bucketfs", []string{"b", "/m"}, true},
		{"bucketfs", []string{"b", "/m", "-o", "rw"}, true},
		{"bucketfs", []string{"mount", "/m"}, false},
		{"bucketfs", []string{"mount", "b", "/m"}, false},
		{"bucketfs", []string{"status", "/m"}, false},
		{"bucketfs", []string{"flush", "/m", "--timeout", "1s"}, false},
		{"bucketfs", []string{"frobnicate"}, false},
		{"bucketfs", []string{"b", "relative"}, false},
		{"bucketfs", []string{"--help"}, false},
	} {
		if got := isHelperCall(c.argv0, c.args); got != c.want {
			t.Errorf("isHelperCall(%q, %q) = %v", c.argv0, c.args, got)
		}
	}
}

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}
