package cache

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
