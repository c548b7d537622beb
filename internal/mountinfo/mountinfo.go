// Package mountinfo reads the kernel's table of mounts as this process
// sees them (/proc/self/mountinfo; proc(5)). It is the one reader of that
// file: the mount command, the control registry and the tests ask it.
package mountinfo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Mount is one line of the table.
type Mount struct {
	Point  string // where it is mounted, unescaped
	FSType string // "fuse.bucketfs", "ext4", ...
	Source string // what is mounted (for bucketfs, the bucket), unescaped
	// Dev is the file system's device number, "MAJOR:MINOR"; for a FUSE
	// mount, MINOR names its connection under /sys/fs/fuse/connections.
	Dev string
}

// Parse reads a table in mountinfo's format. A line is
//
//	ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
//
// with spaces, tabs, newlines and backslashes in paths written as octal
// escapes (\040). Lines it cannot read are skipped.
func Parse(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 7 {
			continue
		}
		for i := 6; i+2 < len(fields); i++ {
			if fields[i] == "-" {
				out = append(out, Mount{Point: unescape(fields[4]), FSType: fields[i+1], Source: unescape(fields[i+2]), Dev: fields[2]})
				break
			}
		}
	}
	return out, sc.Err()
}

// Read returns this process's mounts, in the order they were mounted.
func Read() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	defer f.Close()
	return Parse(f)
}

// Lookup returns the mount on dir that is visible there (the last, if
// several are stacked), and whether there is one.
func Lookup(dir string) (Mount, bool, error) {
	ms, err := Read()
	if err != nil {
		return Mount{}, false, err
	}
	var found Mount
	ok := false
	for _, m := range ms {
		if m.Point == dir {
			found, ok = m, true
		}
	}
	return found, ok, nil
}

// unescape undoes the octal escapes (\040 for a space) of the table.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
