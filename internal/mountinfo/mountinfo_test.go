package mountinfo

import (
	"os"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	table := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
35 22 0:31 / /tmp/a\040b rw,nosuid,nodev,relatime shared:5 master:2 - fuse.bucketfs my\040bucket rw,user_id=0
36 35 0:32 / /tmp/a\040b rw,relatime - fuse.bucketfs other rw
short line
40 22 0:40 / /tmp/tail\134 rw - tmpfs tmpfs rw
`
	ms, err := Parse(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{
		{"/", "ext4", "/dev/vda", "8:1"},
		{"/tmp/a b", "fuse.bucketfs", "my bucket", "0:31"},
		{"/tmp/a b", "fuse.bucketfs", "other", "0:32"},
		{`/tmp/tail\`, "tmpfs", "tmpfs", "0:40"},
	}
	if len(ms) != len(want) {
		t.Fatalf("parsed %+v, want %+v", ms, want)
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, ms[i], want[i])
		}
	}
}

func TestLookupRoot(t *testing.T) {
	if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
		t.Skip("no /proc/self/mountinfo here")
	}
	m, ok, err := Lookup("/")
	if err != nil || !ok || m.FSType == "" {
		t.Fatalf("Lookup(/) = %+v, %v, %v", m, ok, err)
	}
	if _, ok, _ := Lookup("/no/such/mount/point"); ok {
		t.Error("a directory that is no mountpoint was found")
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/mnt/a\040b\011c`: "/mnt/a b\tc",
		`/mnt/a\040b\134c`: `/mnt/a b\c`,
		`/plain`:           "/plain",
		`/bad\9x`:          `/bad\9x`,
	} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
