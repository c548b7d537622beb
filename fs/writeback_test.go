package fs

import (
	"testing"

	"github.com/bucketfs/bucketfs/transfer"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// namedBucket is a bucket that only has a name (MountOptions asks for
// nothing else).
type namedBucket struct{ transfer.Bucket }

func (namedBucket) Name() string { return "b" }

// The writeback cache is asked for at INIT with --writeback-cache only,
// and turns passthrough off: the kernel would refuse it on that
// connection while the nodes counted passthrough handles.
func TestWritebackCacheMountOptions(t *testing.T) {
	for _, wb := range []bool{false, true} {
		o := withWriteback(Options{Passthrough: true, PassthroughWrites: true, WritebackCache: wb})
		f := &FS{opts: o, bucket: namedBucket{}}
		mo := f.MountOptions().MountOptions
		if got := mo.ExtraCapabilities&fuse.CAP_WRITEBACK_CACHE != 0; got != wb {
			t.Errorf("WritebackCache %v: CAP_WRITEBACK_CACHE asked: %v", wb, got)
		}
		if got := mo.DisabledCapabilities&fuse.CAP_PASSTHROUGH != 0; got != wb {
			t.Errorf("WritebackCache %v: CAP_PASSTHROUGH disabled: %v", wb, got)
		}
		if f.opts.Passthrough == wb || f.opts.PassthroughWrites == wb {
			t.Errorf("WritebackCache %v: Passthrough %v, PassthroughWrites %v", wb, f.opts.Passthrough, f.opts.PassthroughWrites)
		}
	}
}
