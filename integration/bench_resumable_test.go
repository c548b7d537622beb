package integration

import (
	"fmt"
	"slices"
	"testing"

	"github.com/bucketfs/bucketfs/internal/emulator"
)

// benchResumableSize is the file of the resumable section: one piece
// (below --parallel-upload-threshold), above --resumable-threshold.
const benchResumableSize = 24 << 20

// benchResumable is the resumable section of 'make bench'
// (BENCH_ONLY=resumable): what a resumable upload session costs next to
// a single request. One new file of 24 MiB is drained by the unmount
// behind the WAN profile, over plain HTTP, with the default
// --resumable-threshold (a session: one more request, to open it) and
// with --resumable-threshold 0 (one request), alternately, cfg.repeat
// times each; medians.
func benchResumable(t *testing.T, cfg benchConfig, tbl *benchTable) []string {
	t.Helper()
	wan := emulator.DefaultWAN()
	one := cfg
	one.size = benchResumableSize
	cases := []transportCase{
		{"resumable session (default)", false, nil},
		{"single request (--resumable-threshold 0)", false, []string{"--resumable-threshold", "0"}},
	}
	got := make([][]float64, len(cases))
	for range max(cfg.repeat, 1) {
		for i, tc := range cases {
			v, _ := drainOnce(t, one, tc, wan)
			got[i] = append(got[i], v)
		}
	}
	med := make([]float64, len(cases))
	for i := range cases {
		slices.Sort(got[i])
		med[i] = got[i][len(got[i])/2]
	}
	perConn := float64(wan.PerConn) / (1 << 20)
	for i, tc := range cases {
		row := benchRow{
			name:     fmt.Sprintf("drain one dirty %s file, WAN, plain HTTP, %s (MiB/s)", sizeLabel(one.size), tc.label),
			native:   fmt.Sprintf("1 conn %s", fmtNum(perConn)),
			bucketfs: fmtNum(med[i]),
			ratio:    fmtRatio(med[i] / perConn),
			target:   "-",
			met:      "-",
			note:     fmt.Sprintf("runs %v", got[i]),
		}
		if i == 0 {
			row.note = fmt.Sprintf("%.2f of the single-request row; ", med[0]/med[1]) + row.note
		}
		tbl.add(row)
	}
	return []string{"resumable rows: one file below --parallel-upload-threshold goes up in one piece over one connection (its limit is the native column); " +
		"a resumable session costs the request that opens it (a round trip of the WAN profile) and resumes after a break instead of sending the file again"}
}
