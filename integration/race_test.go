//go:build race

package integration

// raceEnabled makes the harness build the bucketfs binary with -race too.
const raceEnabled = true
