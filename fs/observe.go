package fs

import (
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// OpObserver is told about every FUSE request the file system answers:
// its name (lower case: "lookup", "getattr", "read", "write", "create",
// ...), how long the daemon took to answer it, and the errno answered (0
// for success). It is called on the goroutine that served the request,
// by many at once, and must be quick. Requests that the kernel serves
// itself (reads and writes through FUSE passthrough, cached attributes
// and names) never reach the daemon and are not seen.
type OpObserver func(op string, d time.Duration, errno syscall.Errno)

// Mount mounts f on dir and starts serving it, as gofs.Mount does, with
// Options.OpObserver (if set) told about every request.
func (f *FS) Mount(dir string) (*fuse.Server, error) {
	opts := f.MountOptions()
	var raw fuse.RawFileSystem = &killprivFS{gofs.NewNodeFS(f.Root(), opts)} // killpriv.go
	if f.clock.max > 0 {
		raw = &gatedFS{RawFileSystem: raw, gate: &f.clock.gate} // gate.go
	}
	if f.opts.OpObserver != nil {
		raw = &observedFS{RawFileSystem: raw, obs: f.opts.OpObserver}
	}
	server, err := fuse.NewServer(raw, dir, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		return nil, err
	}
	return server, nil
}

// observedFS times the requests of the wrapped file system. Methods not
// overridden here (Init, String, SetDebug, OnUnmount, Forget) pass
// through untimed.
var _ fuse.RawFileSystem = (*observedFS)(nil)

type observedFS struct {
	fuse.RawFileSystem
	obs OpObserver
}

func (o *observedFS) done(op string, start time.Time, s fuse.Status) fuse.Status {
	o.obs(op, time.Since(start), syscall.Errno(s))
	return s
}

func (o *observedFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	t := time.Now()
	return o.done("lookup", t, o.RawFileSystem.Lookup(cancel, h, name, out))
}

func (o *observedFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	t := time.Now()
	return o.done("getattr", t, o.RawFileSystem.GetAttr(cancel, in, out))
}

func (o *observedFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	t := time.Now()
	return o.done("setattr", t, o.RawFileSystem.SetAttr(cancel, in, out))
}

func (o *observedFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	t := time.Now()
	return o.done("mknod", t, o.RawFileSystem.Mknod(cancel, in, name, out))
}

func (o *observedFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	t := time.Now()
	return o.done("mkdir", t, o.RawFileSystem.Mkdir(cancel, in, name, out))
}

func (o *observedFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	t := time.Now()
	return o.done("unlink", t, o.RawFileSystem.Unlink(cancel, h, name))
}

func (o *observedFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	t := time.Now()
	return o.done("rmdir", t, o.RawFileSystem.Rmdir(cancel, h, name))
}

func (o *observedFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	t := time.Now()
	return o.done("rename", t, o.RawFileSystem.Rename(cancel, in, oldName, newName))
}

func (o *observedFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	t := time.Now()
	return o.done("link", t, o.RawFileSystem.Link(cancel, in, name, out))
}

func (o *observedFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	t := time.Now()
	return o.done("symlink", t, o.RawFileSystem.Symlink(cancel, h, target, name, out))
}

func (o *observedFS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	t := time.Now()
	b, s := o.RawFileSystem.Readlink(cancel, h)
	return b, o.done("readlink", t, s)
}

func (o *observedFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	t := time.Now()
	return o.done("access", t, o.RawFileSystem.Access(cancel, in))
}

func (o *observedFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	t := time.Now()
	n, s := o.RawFileSystem.GetXAttr(cancel, h, attr, dest)
	return n, o.done("getxattr", t, s)
}

func (o *observedFS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	t := time.Now()
	n, s := o.RawFileSystem.ListXAttr(cancel, h, dest)
	return n, o.done("listxattr", t, s)
}

func (o *observedFS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	t := time.Now()
	return o.done("setxattr", t, o.RawFileSystem.SetXAttr(cancel, in, attr, data))
}

func (o *observedFS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	t := time.Now()
	return o.done("removexattr", t, o.RawFileSystem.RemoveXAttr(cancel, h, attr))
}

func (o *observedFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	t := time.Now()
	return o.done("create", t, o.RawFileSystem.Create(cancel, in, name, out))
}

func (o *observedFS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	t := time.Now()
	return o.done("tmpfile", t, o.RawFileSystem.Tmpfile(cancel, in, out))
}

func (o *observedFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	t := time.Now()
	return o.done("open", t, o.RawFileSystem.Open(cancel, in, out))
}

func (o *observedFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	t := time.Now()
	r, s := o.RawFileSystem.Read(cancel, in, buf)
	return r, o.done("read", t, s)
}

func (o *observedFS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	t := time.Now()
	return o.done("lseek", t, o.RawFileSystem.Lseek(cancel, in, out))
}

func (o *observedFS) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	t := time.Now()
	return o.done("getlk", t, o.RawFileSystem.GetLk(cancel, in, out))
}

func (o *observedFS) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	t := time.Now()
	return o.done("setlk", t, o.RawFileSystem.SetLk(cancel, in))
}

func (o *observedFS) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	t := time.Now()
	return o.done("setlkw", t, o.RawFileSystem.SetLkw(cancel, in))
}

func (o *observedFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	t := time.Now()
	o.RawFileSystem.Release(cancel, in)
	o.done("release", t, fuse.OK)
}

func (o *observedFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	t := time.Now()
	n, s := o.RawFileSystem.Write(cancel, in, data)
	return n, o.done("write", t, s)
}

// Writev is what go-fuse tries first for a write; ENOSYS makes it fall
// back to Write, which then counts the request.
func (o *observedFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	t := time.Now()
	n, s := o.RawFileSystem.Writev(cancel, in, data)
	if s == fuse.ENOSYS {
		return n, s
	}
	return n, o.done("write", t, s)
}

func (o *observedFS) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	t := time.Now()
	n, s := o.RawFileSystem.CopyFileRange(cancel, in)
	return n, o.done("copy_file_range", t, s)
}

func (o *observedFS) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	t := time.Now()
	return o.done("ioctl", t, o.RawFileSystem.Ioctl(cancel, in, inbuf, out, outbuf))
}

func (o *observedFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	t := time.Now()
	return o.done("flush", t, o.RawFileSystem.Flush(cancel, in))
}

func (o *observedFS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	t := time.Now()
	return o.done("fsync", t, o.RawFileSystem.Fsync(cancel, in))
}

func (o *observedFS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	t := time.Now()
	return o.done("fallocate", t, o.RawFileSystem.Fallocate(cancel, in))
}

func (o *observedFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	t := time.Now()
	return o.done("opendir", t, o.RawFileSystem.OpenDir(cancel, in, out))
}

func (o *observedFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	t := time.Now()
	return o.done("readdir", t, o.RawFileSystem.ReadDir(cancel, in, out))
}

func (o *observedFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	t := time.Now()
	return o.done("readdirplus", t, o.RawFileSystem.ReadDirPlus(cancel, in, out))
}

func (o *observedFS) ReleaseDir(in *fuse.ReleaseIn) {
	t := time.Now()
	o.RawFileSystem.ReleaseDir(in)
	o.done("releasedir", t, fuse.OK)
}

func (o *observedFS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	t := time.Now()
	return o.done("fsyncdir", t, o.RawFileSystem.FsyncDir(cancel, in))
}

func (o *observedFS) StatFs(cancel <-chan struct{}, in *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	t := time.Now()
	return o.done("statfs", t, o.RawFileSystem.StatFs(cancel, in, out))
}

func (o *observedFS) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	t := time.Now()
	return o.done("statx", t, o.RawFileSystem.Statx(cancel, in, out))
}
