package integration

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// Part of the small-files section: issue 14's write-out. 2,000 new files
// of 4 KiB are written through a mount with the default settings
// (write-back delay 5s, 8 uploads in flight) behind the WAN profile; the
// time runs from the last close until every file is in the bucket, with
// bucketfs's CPU time (/proc/PID/stat) from the first create to then.

const (
	writeOutFiles  = 2000
	writeOutTarget = 30 * time.Second
)

// benchWriteOut adds the write-out rows to tbl, over plain HTTP and over
// TLS with each --client-protocol (issue 23), and returns their note.
func benchWriteOut(t *testing.T, tbl *benchTable) []string {
	t.Helper()
	var plain time.Duration
	var note string
	for i, tc := range transportCases() { // bench_cold_test.go
		took, n := writeOutOnce(t, tbl, tc)
		note = n
		if i == 0 {
			plain = took
			continue
		}
		last := &tbl.rows[len(tbl.rows)-1]
		x := took.Seconds() / plain.Seconds()
		last.note = fmt.Sprintf("%.2fx the plain HTTP row's time; ", x) + last.note
		last.target, last.met = "<= 1.10x plain", metStr(x <= 1.10)
	}
	return []string{note}
}

// writeOutOnce times one write-out reaching a new emulator the way tc
// says, adds its row and returns the time and the section's note.
func writeOutOnce(t *testing.T, tbl *benchTable, tc transportCase) (time.Duration, string) {
	t.Helper()
	emu := startEmulator(t, nil)
	defer emu.Close()
	wan := emulator.DefaultWAN()
	emu.SetWAN(&wan)
	defer emu.SetWAN(nil)
	var uploads atomic.Int64
	emu.SetAfterHook(func(r *http.Request) {
		if isUploadReq(r) {
			uploads.Add(1)
		}
	})
	defer emu.SetAfterHook(nil)
	m := mount(t, emu, mountOpts{tls: tc.tls, args: tc.args})
	pid := m.cmd.Process.Pid
	contents := testutil.RandomBytes(writeOutFiles*smallFileSize, 1400)
	const dir = "writeout"

	cpu0 := procCPU(pid)
	created := createFiles(t, m.path(dir), writeOutFiles, contents)
	closed := time.Now()
	deadline := closed.Add(5 * time.Minute)
	for {
		// Every file's upload answered (the directory's placeholder may
		// be one more), then the bucket lists them all.
		if uploads.Load() >= writeOutFiles && len(listObjects(t, emu, dir+"/f")) == writeOutFiles {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 minutes after the last close, %d uploads answered, %d files in the bucket", uploads.Load(), len(listObjects(t, emu, dir+"/f")))
		}
		time.Sleep(20 * time.Millisecond) // polling the bucket, not synchronising
	}
	took := time.Since(closed)
	cpu := procCPU(pid) - cpu0
	checkSmallFiles(t, emu, dir, writeOutFiles, contents)
	m.unmount(t)
	perFile := cpu.Seconds() / writeOutFiles * 1000
	// The first file may go 5s after its close; all go in their
	// latency at 8 in flight.
	ceil := max(5, 5+float64(writeOutFiles)/(8/wan.Latency.Seconds())-created.Seconds())
	t.Logf("write-out: %d files in the bucket %v after the last close; bucketfs used %v CPU (%.2f ms a file)", writeOutFiles, took.Round(time.Millisecond), cpu, perFile)
	tbl.add(benchRow{
		name:     fmt.Sprintf("%d x 4 KiB in the bucket after the last close, WAN, %s (s)", writeOutFiles, tc.label),
		native:   "floor " + fmtNum(ceil),
		bucketfs: fmtNum(took.Seconds()),
		ratio:    fmtRatio(ceil / took.Seconds()),
		target:   fmt.Sprintf("<= %v", writeOutTarget),
		met:      metStr(took <= writeOutTarget),
		note:     fmt.Sprintf("defaults; bucketfs CPU %.1fs = %.2f ms a file (create and upload)", cpu.Seconds(), perFile),
	})
	return took, fmt.Sprintf("after-last-close rows: default mount (--write-back-delay 5s, --upload-parallelism 8), behind the WAN profile; floor = the 5s delay, or the first close + 5s + %d uploads at 8 in flight of %v each; "+
		"the time runs from the last close to the bucket listing every file; CPU from the daemon's /proc/PID/stat", writeOutFiles, wan.Latency)
}
