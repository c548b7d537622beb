package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// A config file (--config FILE) is YAML: one "key: value" per line, where
// the keys are the names of the mount flags, plus bucket and mountpoint
// for the two arguments:
//
//	bucket: my-bucket
//	mountpoint: /mnt/data
//	cache-dir: /var/cache/bucketfs/my-bucket
//	cache-max-size: 50GiB
//	write-back-delay: 10s
//	anonymous: false
//
// Values are read as the flags read them: sizes and durations in human
// units, modes in octal. Flags on the command line win over the file. An
// unknown key, a key given twice, or a value the flag refuses is an error
// that names the file, the line and the key.

// Keys of a config file that are the positional arguments, not flags.
const (
	keyBucket     = "bucket"
	keyMountpoint = "mountpoint"
)

// applyConfigFile sets the flags of fl from the file at path and returns
// the bucket and mountpoint it names ("" when it does not).
func applyConfigFile(path string, fl *flag.FlagSet) (bucket, mountpoint string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", "", &usageError{fmt.Sprintf("--config: %v", err)}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return "", "", &usageError{fmt.Sprintf("config %s: %v", path, err)}
	}
	if len(doc.Content) == 0 {
		return "", "", nil // empty file
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return "", "", &usageError{fmt.Sprintf("config %s line %d: want lines of \"key: value\" (keys are flag names), got %s",
			path, root.Line, kindName(root))}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		bad := func(format string, a ...any) error {
			return &usageError{fmt.Sprintf("config %s line %d: %s: ", path, k.Line, k.Value) + fmt.Sprintf(format, a...)}
		}
		if first, dup := seen[k.Value]; dup {
			return "", "", bad("set twice (first on line %d)", first)
		}
		seen[k.Value] = k.Line
		val, err := scalarValue(v)
		if err != nil {
			return "", "", bad("%v", err)
		}
		switch k.Value {
		case keyBucket:
			bucket = val
			continue
		case keyMountpoint:
			mountpoint = val
			continue
		case "config":
			return "", "", bad("a config file cannot name another one")
		}
		f := fl.Lookup(k.Value)
		if f == nil {
			hint := ""
			if alt := strings.ReplaceAll(k.Value, "_", "-"); fl.Lookup(alt) != nil {
				hint = fmt.Sprintf(" (did you mean %s?)", alt)
			}
			return "", "", bad("unknown key%s; keys are the flag names of 'bucketfs mount --help', bucket and mountpoint", hint)
		}
		if err := f.Value.Set(val); err != nil {
			return "", "", bad("invalid value %q: want %s", val, valueKind(f))
		}
	}
	return bucket, mountpoint, nil
}

// scalarValue returns the text of a single value, as written.
func scalarValue(n *yaml.Node) (string, error) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch {
	case n.Kind != yaml.ScalarNode:
		return "", fmt.Errorf("want a single value, got %s", kindName(n))
	case n.Tag == "!!null":
		return "", fmt.Errorf("no value")
	}
	return n.Value, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	}
	return "something else"
}

// valueKind says in words what a flag takes.
func valueKind(f *flag.Flag) string {
	switch f.Value.(type) {
	case *Size:
		return "a size such as 512MiB or 10GiB"
	case *Mode:
		return "octal permission bits such as 0644"
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return "a value"
	}
	switch g.Get().(type) {
	case bool:
		return "true or false"
	case int:
		return "a whole number"
	case time.Duration:
		return "a duration such as 30s, 10m or 1h30m"
	}
	return "a string"
}
