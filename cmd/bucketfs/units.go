package main

import (
	"fmt"
	"strconv"
	"strings"
)

// Size is a byte count given in human units: "512MiB", "10GiB", "1.5TB",
// "4096". Binary suffixes (KiB, MiB, GiB, TiB) are powers of 1024, decimal
// ones (KB, MB, GB, TB) powers of 1000, and the short K, M, G, T are read as
// binary, as 'ls -h' and 'df -h' print them.
type Size int64

var sizeUnits = []struct {
	suffix string
	mult   float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// ParseSize reads a size in human units.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v*mult > 1<<62 {
		return 0, fmt.Errorf("invalid size %q: want a number with an optional unit, such as 512MiB or 10GiB", s)
	}
	return Size(v * mult), nil
}

func (s *Size) String() string { return FormatSize(int64(*s)) }

// Set implements flag.Value.
func (s *Size) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	*s = n
	return nil
}

// AutoSize is a Size or "auto" (stored as -1), for flags whose default
// depends on the machine.
type AutoSize int64

func (s *AutoSize) String() string {
	if *s < 0 {
		return "auto"
	}
	return FormatSize(int64(*s))
}

// Set implements flag.Value.
func (s *AutoSize) Set(v string) error {
	if strings.TrimSpace(v) == "auto" {
		*s = -1
		return nil
	}
	n, err := ParseSize(v)
	if err != nil {
		return fmt.Errorf("%w, or auto", err)
	}
	*s = AutoSize(n)
	return nil
}

// FormatSize prints n in the largest binary unit that keeps it exact.
func FormatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", n>>u.shift, u.suffix)
		}
	}
	return strconv.FormatInt(n, 10)
}

// Mode is a permission mode in octal ("0644", "755").
type Mode uint32

func (m *Mode) String() string { return fmt.Sprintf("%#o", uint32(*m)) }

// Set implements flag.Value.
func (m *Mode) Set(v string) error {
	n, err := strconv.ParseUint(v, 8, 32)
	if err != nil || n > 0o7777 {
		return fmt.Errorf("invalid mode %q: want octal permission bits such as 0644", v)
	}
	*m = Mode(n)
	return nil
}
