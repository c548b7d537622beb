package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigFile(t *testing.T) {
	cases := []struct {
		name  string
		file  string   // config file contents; "-" for no --config
		args  []string // command line after "mount"
		err   string   // part of the error; "" for none
		check func(*mountConfig) error
	}{
		{
			name: "all kinds of values",
			file: "bucket: gs://my-bucket\nmountpoint: /mnt/data\ncache-dir: /srv/cache\ncache-max-size: 512MiB\n" +
				"metadata-ttl: 30s\nprefetch-parallelism: 4\nanonymous: true\nfile-mode: 0600\nlog-format: json\n",
			check: func(c *mountConfig) error {
				switch {
				case c.bucket != "my-bucket" || c.mountpoint != "/mnt/data" || c.cacheDir != "/srv/cache":
					return errors.New("bucket, mountpoint or cache-dir not read")
				case c.cacheMax != 512<<20 || c.metadataTTL != 30*time.Second || c.parallelism != 4:
					return errors.New("size, duration or number not read")
				case !c.anonymous || c.fileMode != 0o600 || c.logFormat != "json":
					return errors.New("bool, mode or string not read")
				}
				return nil
			},
		},
		{
			name: "flags override the file",
			file: "bucket: bkt1\nmountpoint: /m1\ncache-max-size: 1GiB\nanonymous: true\nwrite-back-delay: 1m\n",
			args: []string{"--cache-max-size", "2GiB", "--anonymous=false", "bkt2", "/m2"},
			check: func(c *mountConfig) error {
				if c.cacheMax != 2<<30 || c.anonymous || c.bucket != "bkt2" || c.mountpoint != "/m2" {
					return errors.New("a flag did not win over the file")
				}
				if c.writeBackDelay != time.Minute {
					return errors.New("a key no flag overrides was lost")
				}
				return nil
			},
		},
		{
			name:  "empty file",
			file:  "",
			args:  []string{"bucket-x", "/mnt/x"},
			check: func(c *mountConfig) error { return nil },
		},
		{
			name:  "comments only",
			file:  "# nothing set here\n",
			args:  []string{"bucket-x", "/mnt/x"},
			check: func(c *mountConfig) error { return nil },
		},
		{name: "unknown key", file: "bucket: bkt\nmountpoint: /m\ncache-size: 1GiB\n", err: "line 3: cache-size: unknown key"},
		{name: "underscore instead of dash", file: "cache_max_size: 1GiB\n", err: "cache_max_size: unknown key (did you mean cache-max-size?)"},
		{name: "bad size", file: "cache-max-size: lots\n", err: `line 1: cache-max-size: invalid value "lots": want a size such as 512MiB`},
		{name: "bad duration", file: "metadata-ttl: 30\n", err: `metadata-ttl: invalid value "30": want a duration such as 30s`},
		{name: "bad number", file: "prefetch-parallelism: 16MiB\n", err: `prefetch-parallelism: invalid value "16MiB": want a whole number`},
		{name: "bad bool", file: "anonymous: 3\n", err: `anonymous: invalid value "3": want true or false`},
		{name: "bad mode", file: "file-mode: 999\n", err: `file-mode: invalid value "999": want octal permission bits`},
		{name: "list instead of a value", file: "cache-dir: [a, b]\n", err: "cache-dir: want a single value, got a list"},
		{name: "mapping instead of a value", file: "endpoint:\n  host: x\n", err: "endpoint: want a single value, got a mapping"},
		{name: "no value", file: "cache-dir:\n", err: "line 1: cache-dir: no value"},
		{name: "key twice", file: "uid: 1\ngid: 2\nuid: 3\n", err: "line 3: uid: set twice (first on line 1)"},
		{name: "not a mapping", file: "- cache-dir\n", err: "want lines of \"key: value\""},
		{name: "not YAML", file: "cache-dir: [\n", err: "config "},
		{name: "config names a config", file: "config: /etc/other.yaml\n", err: "config: a config file cannot name another one"},
		{name: "value checked after reading", file: "bucket: bkt\nmountpoint: /m\nprefetch-parallelism: 0\n", err: "--prefetch-parallelism must be between 1 and 1024"},
		{name: "bad log format", file: "bucket: bkt\nmountpoint: /m\nlog-format: xml\n", err: `--log-format must be text or json, got "xml"`},
		{name: "bad client protocol", file: "bucket: bkt\nmountpoint: /m\nclient-protocol: h2\n", err: `--client-protocol: unknown client protocol "h2": want http1 or http2`},
		{name: "client protocol", file: "bucket: bkt\nmountpoint: /m\nclient-protocol: http2\nca-file: /etc/ca.pem\n",
			check: func(c *mountConfig) error {
				if c.clientProtocol != "http2" || c.caFile != "/etc/ca.pem" {
					return errors.New("client-protocol or ca-file not read")
				}
				return nil
			}},
		{name: "no bucket anywhere", file: "cache-max-size: 1GiB\n", err: "mount takes BUCKET and MOUNTPOINT (or bucket: and mountpoint: in the --config file), got 0"},
		{name: "missing file", file: "-", args: []string{"--config", "/nonexistent/bucketfs.yaml", "bkt", "/m"}, err: "--config: open /nonexistent/bucketfs.yaml: no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if c.file != "-" {
				path := filepath.Join(t.TempDir(), "bucketfs.yaml")
				if err := os.WriteFile(path, []byte(c.file), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append([]string{"--config", path}, args...)
			}
			cfg, err := parseMountArgs(args)
			if c.err != "" {
				var ue *usageError
				if err == nil || !strings.Contains(err.Error(), c.err) || !errors.As(err, &ue) {
					t.Fatalf("error %v; want a usage error containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := c.check(cfg); err != nil {
				t.Errorf("%v: %+v", err, cfg)
			}
		})
	}
}

// A config file sets exactly what the same flags would.
func TestConfigFileMatchesFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	file := "cache-max-size: 3GiB\nflush-timeout: 90s\nread-only: true\ndir-mode: \"0700\"\nfsync: remote\nuid: 42\n"
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	fromFile, err := parseMountArgs([]string{"--config", path, "bkt", "/m"})
	if err != nil {
		t.Fatal(err)
	}
	fromFlags, err := parseMountArgs([]string{"--cache-max-size=3GiB", "--flush-timeout=90s", "--read-only",
		"--dir-mode=0700", "--fsync=remote", "--uid=42", "bkt", "/m"})
	if err != nil {
		t.Fatal(err)
	}
	fromFile.configFile = ""
	if *fromFile != *fromFlags {
		t.Errorf("config file gives\n%+v\nflags give\n%+v", *fromFile, *fromFlags)
	}
}

// Every flag of the mount is in a group of --help, with its default.
func TestMountUsageGroupsEveryFlag(t *testing.T) {
	c := &mountConfig{}
	fl := newMountFlags(c)
	usage := mountUsage(fl)
	if strings.Contains(usage, "\nOther:") {
		t.Errorf("some flags are in no group of flagGroups:\n%s", usage)
	}
	for _, want := range []string{"Bucket and credentials:", "Cache:", "Prefetch (reads):", "Write-back:",
		"FUSE and permissions:", "Logging:", "Operations:",
		"--cache-max-size SIZE", "(default 10GiB)", "--metadata-ttl DURATION", "(default 1m)", "(default off)", "--config FILE"} {
		if !strings.Contains(usage, want) {
			t.Errorf("usage lacks %q:\n%s", want, usage)
		}
	}
}

// --pprof is refused unless the metrics listener is on a loopback
// address: profiles show the process's memory.
func TestPprofNeedsLoopbackMetrics(t *testing.T) {
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"--pprof"}, false},
		{[]string{"--pprof", "--metrics-addr", "0.0.0.0:9100"}, false},
		{[]string{"--pprof", "--metrics-addr", "9100"}, true},
		{[]string{"--pprof", "--metrics-addr", "127.0.0.1:9100"}, true},
	} {
		_, err := parseMountArgs(append(c.args, "bkt", "/m"))
		var ue *usageError
		if c.ok && err != nil || !c.ok && (err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), "--pprof")) {
			t.Errorf("%v: %v", c.args, err)
		}
	}
}
