package cache

import "fmt"

// shorterOrLonger says how a file of got bytes differs from the want it
// should have, for messages that give both numbers.
func shorterOrLonger(got, want int64) string {
	switch {
	case got < want:
		return "shorter"
	case got > want:
		return "longer"
	}
	return "the right size"
}

// sizeText writes n bytes for a message: "512 B", "60.7 MiB".
func sizeText(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	if n < 1<<10 {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/(1<<10), 0
	for v >= 1<<10 && u < len(units)-1 {
		v, u = v/(1<<10), u+1
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}
