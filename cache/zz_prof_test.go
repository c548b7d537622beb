package cache

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/internal/emulator"
	"github.com/bucketfs/bucketfs/transfer"
)

func TestZZProfWarm(t *testing.T) {
	checkInvariants = false
	defer func() { checkInvariants = true }()
	if os.Getenv("ZZPROF") == "" {
		t.Skip()
	}
	e := newEnv(t)
	for i := range 2 {
		e.emu.Put(bucketName, fmt.Sprintf("w/big%d", i), pattern(64<<20, uint32(i)))
	}
	for i := range 2000 {
		e.emu.Put(bucketName, fmt.Sprintf("w/d%02d/f%03d", i/100, i%100), pattern(16<<10, uint32(i)))
	}
	wan := emulator.DefaultWAN()
	e.emu.SetWAN(&wan)
	o := e.opts(1 << 30)
	o.ChunkSize, o.Parallelism = 8<<20, 16
	c, err := Open(o, transfer.NewLimited(e.b, 128))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	r, err := c.Warm(e.ctx, []string{"w"}, WarmOptions{}, nil)
	t.Logf("warm %v: %+v %v", time.Since(start), r.WarmProgress, err)
}

func TestZZProfDrain(t *testing.T) {
	checkInvariants = false
	defer func() { checkInvariants = true }()
	if os.Getenv("ZZPROF") == "" {
		t.Skip()
	}
	e := newEnv(t)
	o := e.opts(1 << 30)
	o.WriteBackDelay = time.Hour
	c, err := Open(o, transfer.NewLimited(e.b, 64))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data := pattern(4096, 1)
	for i := range 2000 {
		w, err := c.OpenWrite(e.ctx, transfer.ObjectAttrs{Name: fmt.Sprintf("s/f%05d", i)}, true, false)
		if err != nil {
			t.Fatal(err)
		}
		w.WriteAt(data, 0)
		w.Close()
	}
	wan := emulator.DefaultWAN()
	e.emu.SetWAN(&wan)
	start := time.Now()
	left := c.Flush(e.ctx, nil)
	t.Logf("drain %v, left %d", time.Since(start), len(left))
}
