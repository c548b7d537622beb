package integration

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/internal/testutil"
)

// The footer section (issue 27): what a reader of a big object's last
// MiB (a Parquet, ORC or zip footer, an MP4 index) costs. Behind the WAN
// profile, a fresh mount; one process opens a cold object of
// BENCH_SIZE_MIB, reads its last MiB and closes it. The row gives the
// time of that read and the object bytes the mount fetched in the 15 s
// after the open (bucketfs_bucket_bytes_total{method="read"}): what the
// egress of that one read was. Issue 27's goals: <= 0.5 s and <= 64 MiB.

const (
	benchFooterObj  = "footer/big.parquet"
	footerWindow    = 15 * time.Second
	footerReadBytes = 1 << 20
)

func benchFooter(t *testing.T, emu *emulator.Server, cfg benchConfig, tbl *benchTable) []string {
	t.Helper()
	put(t, emu, benchFooterObj, testutil.RandomBytes(int(cfg.size), 303))
	wan := emulator.DefaultWAN()
	emu.SetWAN(&wan)
	defer emu.SetWAN(nil)
	var secs, fetched []float64
	for rep := range cfg.repeat {
		m := mount(t, emu, mountOpts{args: []string{"--cache-max-size", "4GiB", "--metrics-addr", "127.0.0.1:0"}})
		url := m.metricsURL(t)
		start := time.Now()
		f, err := os.Open(m.path(benchFooterObj))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, footerReadBytes)
		n, err := f.ReadAt(buf, cfg.size-footerReadBytes)
		d := time.Since(start)
		f.Close()
		if err != nil || n != footerReadBytes {
			t.Fatalf("footer read: %d bytes, %v", n, err)
		}
		time.Sleep(footerWindow - time.Since(start)) // the window measured, not a synchronization
		got := need(t, scrape(t, url), `bucketfs_bucket_bytes_total{method="read"}`)
		m.unmount(t)
		t.Logf("repeat %d footer read of %s: %v, %.0f MiB fetched in %v", rep+1, sizeLabel(cfg.size), d.Round(time.Millisecond), got/(1<<20), footerWindow)
		secs, fetched = append(secs, d.Seconds()), append(fetched, got/(1<<20))
	}
	s, mib := median(secs), median(fetched)
	tbl.add(benchRow{
		name:     fmt.Sprintf("footer read, last MiB of a cold %s object (s)", sizeLabel(cfg.size)),
		native:   "-",
		bucketfs: fmtSec(s),
		ratio:    "-",
		target:   "<= 0.5 s, <= 64 MiB fetched",
		met:      metStr(s <= 0.5 && mib <= 64),
		note:     fmt.Sprintf("%.0f MiB fetched in the %v after the open (open, pread, close; WAN profile)", mib, footerWindow),
	})
	return []string{"footer: one process reads the last MiB of a cold object and closes it; bytes from the mount's metrics"}
}
