package testhook

import (
	"strings"
	"time"
)

// parse reads BUCKETFS_TEST_PAUSE: point=duration, comma-separated;
// malformed fields are skipped.
func parse(s string) map[string]time.Duration {
	m := map[string]time.Duration{}
	for _, f := range strings.Split(s, ",") {
		point, d, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok {
			continue
		}
		if v, err := time.ParseDuration(d); err == nil {
			m[point] = v
		}
	}
	return m
}
