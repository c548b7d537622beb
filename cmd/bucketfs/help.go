package main

import (
	"flag"
	"fmt"
	"strings"
	"time"
)

// flagGroups orders 'bucketfs mount --help'. A flag missing here is still
// shown, under "Other".
var flagGroups = []struct {
	title string
	flags []string
}{
	{"Bucket and credentials", []string{"endpoint", "anonymous", "ca-file", "client-protocol", "max-requests", "check-timeout", "offline-after", "stall-timeout"}},
	{"Cache", []string{"cache-dir", "cache-max-size", "cache-min-free", "cache-full-wait", "metadata-ttl",
		"metadata-strict", "metadata-max-names", "memory-limit", "notify-topic", "notify-subscription"}},
	{"Prefetch (reads)", []string{"prefetch-chunk-size", "prefetch-min-range", "prefetch-parallelism", "prefetch-whole-max", "prefetch", "prefetch-files", "prefetch-max-size", "prefetch-window"}},
	{"Write-back", []string{"write-back-delay", "upload-parallelism", "parallel-upload-threshold", "resumable-threshold",
		"part-size", "part-parallelism", "multipart-endpoint", "fsync", "flush-timeout"}},
	{"FUSE and permissions", []string{"uid", "gid", "file-mode", "dir-mode", "read-only", "noexec",
		"allow-other", "passthrough", "passthrough-writes", "writeback-cache", "debug-fuse"}},
	{"Logging", []string{"log-level", "log-format"}},
	{"Operations", []string{"config", "metrics-addr", "pprof"}},
}

const mountUsageHead = `Usage: bucketfs mount BUCKET MOUNTPOINT [flags]
       bucketfs mount --config FILE [flags]

Mounts gs://BUCKET on MOUNTPOINT and serves it until Ctrl-C, SIGTERM or
'umount MOUNTPOINT' (or 'fusermount3 -u MOUNTPOINT'); then uploads the changes
still pending, for at most --flush-timeout, and exits (status 1 if some are
left: they stay in the cache and go up at the next mount).

Every flag can also be set in the --config file, a YAML file whose keys are
the flag names (plus bucket and mountpoint), e.g. "cache-max-size: 50GiB".
A flag on the command line wins over the file. Sizes take KiB, MiB, GiB, TiB
(or KB, MB, GB, TB); durations take ms, s, m, h (30s, 10m, 1h30m).
`

// mountUsage renders the flags of fl by group, each with its default.
func mountUsage(fl *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString(mountUsageHead)
	shown := map[string]bool{}
	section := func(title string, flags []*flag.Flag) {
		if len(flags) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n%s:\n", title)
		for _, f := range flags {
			b.WriteString(flagLine(f))
			shown[f.Name] = true
		}
	}
	for _, g := range flagGroups {
		var fs []*flag.Flag
		for _, name := range g.flags {
			if f := fl.Lookup(name); f != nil {
				fs = append(fs, f)
			}
		}
		section(g.title, fs)
	}
	var other []*flag.Flag
	fl.VisitAll(func(f *flag.Flag) {
		if !shown[f.Name] {
			other = append(other, f)
		}
	})
	section("Other", other)
	return b.String()
}

// argNames name the value of string flags that take one of a few words.
var argNames = map[string]string{"fsync": "local|remote", "log-level": "LEVEL", "log-format": "text|json"}

// flagLine is "  --name ARG\n        meaning (default X)\n"; ARG is a
// `quoted` word of the usage, or the kind of value.
func flagLine(f *flag.Flag) string {
	arg, usage := flag.UnquoteUsage(f)
	switch f.Value.(type) {
	case *Size:
		arg = "SIZE"
	case *Mode:
		arg = "MODE"
	default:
		switch {
		case argNames[f.Name] != "":
			arg = argNames[f.Name]
		case arg == "int":
			arg = "N"
		case arg != "" && !strings.Contains(f.Usage, "`"):
			arg = strings.ToUpper(arg)
		}
	}
	def := f.DefValue
	if g, ok := f.Value.(flag.Getter); ok {
		if d, ok := g.Get().(time.Duration); ok {
			def = formatDuration(d)
		}
	}
	switch {
	case f.Name == "uid" || f.Name == "gid":
		def = "the user running bucketfs"
	case def == "false":
		def = "off"
	case def == "true":
		def = "on"
	}
	name := "--" + f.Name
	if arg != "" {
		name += " " + arg
	}
	line := fmt.Sprintf("  %s\n        %s", name, usage)
	if def != "" && !strings.Contains(usage, "(default") {
		line += fmt.Sprintf(" (default %s)", def)
	}
	return line + "\n"
}

// formatDuration prints d without zero tails: 1m, not 1m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
