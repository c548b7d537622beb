package fs

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/bucketfs/bucketfs/cache"
	"github.com/bucketfs/bucketfs/fs/names"
	"github.com/bucketfs/bucketfs/transfer"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// dirNode is a directory: the bucket's root, a "dir/" placeholder object,
// or a prefix that only exists because objects are under it.
type dirNode struct {
	gofs.Inode
	clockLink // the bound on the kernel's nodes (reclaim.go)
	fsys      *FS

	mu  sync.Mutex
	pfx string // guarded by mu: "" for the root, else ending in '/'; a rename changes it
}

// prefix is the object name prefix of the directory's entries: "" for
// the root, else its path and '/'.
func (d *dirNode) prefix() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pfx
}

var (
	_ gofs.NodeLookuper       = (*dirNode)(nil)
	_ gofs.NodeOpendirHandler = (*dirNode)(nil)
	_ gofs.NodeGetattrer      = (*dirNode)(nil)
	_ gofs.NodeStatfser       = (*dirNode)(nil)
	_ gofs.NodeCreater        = (*dirNode)(nil)
	_ gofs.NodeMkdirer        = (*dirNode)(nil)
	_ gofs.NodeUnlinker       = (*dirNode)(nil)
	_ gofs.NodeRmdirer        = (*dirNode)(nil)
	_ gofs.NodeRenamer        = (*dirNode)(nil)
	_ gofs.NodeSymlinker      = (*dirNode)(nil)
	_ gofs.NodeSetattrer      = (*dirNode)(nil)
	_ gofs.NodeLinker         = (*dirNode)(nil)
	_ gofs.NodeFsyncer        = (*dirNode)(nil)
)

// Lookup implements gofs.NodeLookuper.
func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	d.touch()
	full := d.prefix() + name
	if len(name) > names.MaxNameLen || len(full) > maxObjectName {
		// As a local disk answers a name past NAME_MAX, whatever the
		// operation the lookup is for (stat, unlink, link, rename).
		return nil, syscall.ENAMETOOLONG
	}
	if !names.ValidName(name) || d.reserved(name) || !validObjectText(name) {
		// Nothing can have such a name, here or in the bucket: no need
		// to ask (the bucket client would refuse the name itself).
		return nil, syscall.ENOENT
	}
	c, err := d.fsys.names.Resolve(ctx, full, d.fsys.warnOnce)
	if err != nil {
		return nil, d.fsys.errno(ctx, "lookup", full, err)
	}
	defer d.fsys.limitStale(out, c)
	return d.child(ctx, name, c, out)
}

// maxObjectName is the longest object name GCS takes, in bytes.
const maxObjectName = 1024

// newNameErrno says whether name (with a trailing '/' for a directory)
// can be made in d and kept in the bucket: 0, or the errno to answer.
// GCS refuses names over 1024 bytes, with CR or LF, or not UTF-8: such a
// file could never be uploaded, so it is refused at once.
func (d *dirNode) newNameErrno(name string) syscall.Errno {
	seg := strings.TrimSuffix(name, "/")
	switch {
	case len(seg) > names.MaxNameLen || len(d.prefix())+len(name) > maxObjectName:
		return syscall.ENAMETOOLONG
	case !names.ValidName(seg), !validObjectText(seg):
		return syscall.EINVAL
	case d.reserved(seg):
		return syscall.EPERM
	}
	return 0
}

// validObjectText says whether s can be (part of) an object name, which
// GCS wants in UTF-8 without CR or LF.
func validObjectText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsAny(s, "\r\n")
}

// stagingDir is the top-level directory where parallel uploads stage
// their parts (transfer.StagingPrefix). The mount hides it and refuses to
// create it.
var stagingDir = strings.TrimSuffix(transfer.StagingPrefix, "/")

// reserved reports whether name in d is the staging directory.
func (d *dirNode) reserved(name string) bool {
	return d.prefix() == "" && name == stagingDir
}

// retireLink retires the inode number of the symbolic link the kernel
// holds at name in d, if any: that name is another file's now.
func retireLink(d *dirNode, name string) {
	if in := d.GetChild(name); in != nil {
		if s, ok := in.Operations().(*symlinkNode); ok {
			d.fsys.retire(s.ino)
		}
	}
}

// child returns the inode for name, updating an existing inode's attributes.
func (d *dirNode) child(ctx context.Context, name string, c names.Entry, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	f := d.fsys
	full := d.prefix() + name
	switch c.Kind {
	case names.Dir:
		ph, _, err := f.names.DirAttrs(ctx, full+"/")
		if err != nil {
			return nil, f.errno(ctx, "lookup", full, err)
		}
		f.fillDir(&out.Attr, full+"/", ph)
		if in := d.GetChild(name); in != nil {
			if dn, ok := in.Operations().(*dirNode); ok && dn.prefix() == full+"/" {
				// The kernel's node for it (moved here by a rename: its
				// number is its old name's).
				dn.touch()
				out.Attr.Ino = in.StableAttr().Ino
				return in, 0
			}
		}
		out.Attr.Ino = f.dirIno(full + "/")
		dn := &dirNode{fsys: f, pfx: full + "/"}
		in := d.NewInode(ctx, dn, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: out.Attr.Ino})
		f.clock.add(dn, &dn.clockLink)
		return in, 0
	case names.File:
		if isSymlink(c.Attrs) {
			return d.symlinkChild(ctx, name, c.Attrs, out), 0
		}
		var ino uint64
		var held *fileNode
		for _, n := range f.nodesNamed(full) {
			if n.holds(c.Attrs.Generation) {
				// The kernel has a node for this very file already (a
				// lookup made again, as for a rename's target, or after
				// this cache's own upload): the same inode, not a second
				// one that go-fuse's tree would take for it.
				ino, held = n.ino, n
				break
			}
		}
		if ino == 0 {
			ino = f.fileIno(c.Attrs)
		}
		in := d.NewInode(ctx, &fileNode{fsys: f, name: full, ino: ino},
			gofs.StableAttr{Mode: fileType(c.Attrs), Ino: ino}) // a regular or special file
		n := in.Operations().(*fileNode)
		f.track(n)
		f.clock.add(n, &n.clockLink)
		n.setAttrs(c.Attrs)
		if held != nil {
			held.touch()
			// go-fuse answers the kernel with held's inode, which has the
			// same stable attributes, and drops n: held must hold c, not
			// the version this cache's upload of its content replaced.
			held.takeOwn(c.Attrs)
		}
		f.fillFile(&out.Attr, n.currentAttrs(), n.ino)
		return in, 0
	default:
		return nil, syscall.ENOENT
	}
}

// Fsync implements gofs.NodeFsyncer: the names made, deleted and renamed
// here are records of the cache's journal; fsync of a directory makes
// them durable against power loss (the atomic-save pattern: write a
// temporary file, fsync it, rename it over, fsync the directory).
func (d *dirNode) Fsync(ctx context.Context, fh gofs.FileHandle, flags uint32) syscall.Errno {
	if err := d.fsys.cache.Sync(); err != nil {
		return d.fsys.errno(ctx, "fsync", d.prefix(), err)
	}
	return 0
}

// Getattr implements gofs.NodeGetattrer: a directory's mode, owner and
// time are kept in its placeholder object's metadata.
func (d *dirNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	ctx = uninterrupted(ctx)
	d.touch()
	prefix := d.prefix()
	ph, _, err := d.fsys.names.DirAttrs(ctx, prefix)
	if err != nil {
		return d.fsys.errno(ctx, "getattr", prefix, err)
	}
	d.fsys.fillDir(&out.Attr, prefix, ph)
	out.Ino = d.StableAttr().Ino
	out.SetTimeout(d.fsys.opts.MetadataTTL)
	return 0
}

// Setattr implements gofs.NodeSetattrer: chmod, chown and utimes of a
// directory are kept in the metadata of its placeholder object ("dir/"),
// made for them if the directory exists only through objects under it.
// The root has no object: its changes are accepted and not kept (docs/design.md,
// limits), so that tools which copy trees (tar, rsync -a, cp -a) do not
// fail.
func (d *dirNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	ctx = uninterrupted(ctx)
	f := d.fsys
	if f.opts.ReadOnly {
		return syscall.EROFS
	}
	prefix := d.prefix()
	if md := setattrMeta(in, true); md != nil && prefix != "" {
		if err := d.setMeta(ctx, prefix, md); err != nil {
			return f.errno(ctx, "setattr", prefix, err)
		}
		if _, ok := in.GetMTime(); ok {
			f.dirTimes.forget(prefix) // the time set is the directory's (times.go)
		}
	}
	return d.Getattr(ctx, fh, out)
}

// setMeta sets metadata keys md on the placeholder of directory prefix,
// through the cache (in order with the placeholder's other changes),
// making the placeholder if there is none.
func (d *dirNode) setMeta(ctx context.Context, prefix string, md map[string]string) error {
	f := d.fsys
	ph, exists, err := f.names.DirAttrs(ctx, prefix)
	if err != nil {
		return err
	}
	if exists {
		return f.cache.SetMeta(ctx, ph, md)
	}
	return f.makeEmpty(ctx, transfer.ObjectAttrs{Name: prefix}, md)
}

// Statfs implements gofs.NodeStatfser.
func (d *dirNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	statfs(out)
	return 0
}

// Create implements gofs.NodeCreater: a new, empty file lives in the cache
// at once and reaches the bucket after its last close.
func (d *dirNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	ctx = uninterrupted(ctx)
	f := d.fsys
	if f.opts.ReadOnly {
		return nil, nil, 0, syscall.EROFS
	}
	if errno := d.newNameErrno(name); errno != 0 {
		return nil, nil, 0, errno
	}
	md, _, errno := d.newOwner(ctx)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	modeMeta(md, mode, f.opts.FileMode)
	full := d.prefix() + name
	a := transfer.ObjectAttrs{Name: full, Updated: time.Now()}
	ino := f.fileIno(a) // a new number: the name may have had another file before
	f.fillFile(&out.Attr, a, ino)
	in := d.NewInode(ctx, &fileNode{fsys: f, name: full, ino: ino}, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: ino})
	n := in.Operations().(*fileNode)
	f.track(n)
	f.clock.add(n, &n.clockLink)
	n.setAttrs(a)
	h, err := n.writeHandle(ctx, a, true)
	if err != nil {
		f.untrack(n, full) // the kernel never sees the node
		return nil, nil, 0, f.errno(ctx, "create", full, err)
	}
	if len(md) > 0 {
		if err := f.cache.SetMeta(ctx, a, md); err != nil {
			h.(gofs.FileReleaser).Release(ctx)
			return nil, nil, 0, f.errno(ctx, "create", full, err)
		}
		f.fillFile(&out.Attr, n.currentAttrs(), ino)
	}
	f.names.Forget(full)
	f.dirTimes.changed(d.prefix())
	return in, h, 0, 0
}

// Mkdir implements gofs.NodeMkdirer with a "name/" placeholder object,
// written back like a file.
func (d *dirNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx = uninterrupted(ctx)
	f := d.fsys
	if f.opts.ReadOnly {
		return nil, syscall.EROFS
	}
	if errno := d.newNameErrno(name + "/"); errno != 0 {
		return nil, errno
	}
	full := d.prefix() + name
	c, err := f.names.Resolve(ctx, full, f.warnOnce)
	if err != nil {
		return nil, f.errno(ctx, "mkdir", full, err)
	}
	if c.Kind != names.None {
		return nil, syscall.EEXIST
	}
	md, sgid, errno := d.newOwner(ctx)
	if errno != 0 {
		return nil, errno
	}
	if sgid {
		mode |= syscall.S_ISGID // inherited, as on a local disk
	}
	modeMeta(md, mode, f.opts.DirMode)
	if err := f.makeEmpty(ctx, transfer.ObjectAttrs{Name: full + "/"}, md); err != nil {
		return nil, f.errno(ctx, "mkdir", full, err)
	}
	f.names.Forget(full)
	f.names.MadeEmpty(full + "/")
	f.dirTimes.changed(d.prefix())
	return d.child(ctx, name, names.Entry{Kind: names.Dir}, out)
}

// Unlink implements gofs.NodeUnlinker. The deletion is recorded in the
// cache (durably) and reaches the bucket in order with the name's other
// changes; the name is gone from the mount at once.
func (d *dirNode) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx = uninterrupted(ctx)
	f := d.fsys
	if f.opts.ReadOnly {
		return syscall.EROFS
	}
	full := d.prefix() + name
	c, err := f.names.Resolve(ctx, full, f.warnOnce)
	if err != nil {
		return f.errno(ctx, "unlink", full, err)
	}
	switch c.Kind {
	case names.None:
		return syscall.ENOENT
	case names.Dir:
		return syscall.EISDIR
	}
	defer f.nameLeaving(ctx, full)() // their content goes with the name (lazywrite.go)
	victims := f.fileNodes(full)
	if err := f.cache.Remove(ctx, full, c.Attrs.Generation); err != nil {
		return f.errno(ctx, "unlink", full, err)
	}
	f.names.Forget(full)
	victims.unlinked()
	f.dirTimes.changed(d.prefix())
	return 0
}

// Rmdir implements gofs.NodeRmdirer: an empty directory's placeholder
// object, if any, is deleted like a file.
func (d *dirNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	ctx = uninterrupted(ctx)
	f := d.fsys
	if f.opts.ReadOnly {
		return syscall.EROFS
	}
	full := d.prefix() + name
	c, err := f.names.Resolve(ctx, full, f.warnOnce)
	if err != nil {
		return f.errno(ctx, "rmdir", full, err)
	}
	if c.Kind != names.Dir {
		return syscall.ENOTDIR
	}
	l, err := f.names.List(ctx, full+"/", f.warnOnce)
	if err != nil {
		return f.errno(ctx, "rmdir", full, err)
	}
	if len(l.Names()) > 0 {
		return syscall.ENOTEMPTY
	}
	// Whatever placeholder the bucket has (there may be none).
	if err := f.cache.Remove(ctx, full+"/", -1); err != nil {
		return f.errno(ctx, "rmdir", full, err)
	}
	f.names.Forget(full)
	f.names.Forget(full + "/")
	f.dirTimes.forget(full + "/")
	f.dirTimes.changed(d.prefix())
	return 0
}

// Rename implements gofs.NodeRenamer: the content takes the new name in
// the cache at once (replacing a file there), and the bucket follows (the
// new object uploaded, the old one deleted). A directory is renamed with
// everything under it (renameDir). RENAME_EXCHANGE swaps two files
// (exchange); with a directory it is not supported (EINVAL, docs/design.md).
func (d *dirNode) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	errno := d.rename(uninterrupted(ctx), name, newParent, newName, flags)
	if np, ok := newParent.(*dirNode); ok && errno == 0 {
		d.fsys.dirTimes.forget(d.prefix() + name + "/") // if it was a directory
		d.fsys.dirTimes.changed(d.prefix(), np.prefix())
	}
	return errno
}

func (d *dirNode) rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	f := d.fsys
	if f.opts.ReadOnly {
		return syscall.EROFS
	}
	if flags&^uint32(renameNoReplace|renameExchange) != 0 || flags == renameNoReplace|renameExchange {
		return syscall.EINVAL
	}
	np, ok := newParent.(*dirNode)
	if !ok {
		return syscall.EINVAL
	}
	if errno := np.newNameErrno(newName); errno != 0 {
		return errno
	}
	from, to := d.prefix()+name, np.prefix()+newName
	if from == to {
		return 0 // renaming a name to itself does nothing (POSIX)
	}
	src, err := f.names.Resolve(ctx, from, f.warnOnce)
	if err != nil {
		return f.errno(ctx, "rename", from, err)
	}
	switch {
	case src.Kind == names.None:
		return syscall.ENOENT
	case flags&renameExchange != 0:
		return f.exchange(ctx, from, src, to, func() { retireLink(d, name); retireLink(np, newName) })
	case src.Kind == names.Dir:
		return d.renameDir(ctx, name, np, newName, flags)
	}
	dst, err := f.names.Resolve(ctx, to, f.warnOnce)
	if err != nil {
		return f.errno(ctx, "rename", to, err)
	}
	switch {
	case dst.Kind == names.Dir:
		return syscall.EISDIR
	case dst.Kind == names.File && flags&renameNoReplace != 0:
		return syscall.EEXIST
	}
	defer f.nameLeaving(ctx, to)() // their content goes with the name (lazywrite.go)
	victims := f.fileNodes(to)     // the file replaced, if the kernel knows it
	moving := f.nodesNamed(from)
	// The base is the cache's, not dst's: an upload of to may have been
	// confirmed since it was resolved, and the node's generation must be
	// the one its content's upload replaces, or it never takes that
	// upload's version (confirm.go) and opens it at a version gone.
	base, err := f.cache.Rename(ctx, src.Attrs, to, dst.Attrs.Generation)
	if err != nil {
		return f.errno(ctx, "rename", from, err)
	}
	f.names.Forget(from)
	f.names.Forget(to)
	// Both names hold other files now: a lookup must not find the inode
	// of either version by its name and generation. File nodes retire
	// their numbers as they change (renamed, unlinked); symbolic links
	// have no node index, and are retired here.
	retireLink(d, name)
	retireLink(np, newName)
	victims.unlinked()
	// The kernel moves the inode to the new name: so does the node.
	for _, n := range moving {
		n.renamed(to, base)
	}
	return 0
}

// exchange swaps file src and file to (RENAME_EXCHANGE): each name takes
// the other's content in the cache at once (cache.Exchange), the bucket
// follows, and the kernel's nodes follow their content, as the kernel
// swaps its entries. Directories are not exchanged (EINVAL, docs/design.md): the
// swap of two trees would have to be one step of the index.
func (f *FS) exchange(ctx context.Context, from string, src names.Entry, to string, retireLinks func()) syscall.Errno {
	dst, err := f.names.Resolve(ctx, to, f.warnOnce)
	if err != nil {
		return f.errno(ctx, "rename", to, err)
	}
	switch {
	case dst.Kind == names.None:
		return syscall.ENOENT
	case src.Kind == names.Dir || dst.Kind == names.Dir:
		return syscall.EINVAL
	}
	movingFrom, movingTo := f.nodesNamed(from), f.nodesNamed(to)
	baseFrom, baseTo, err := f.cache.Exchange(ctx, src.Attrs, dst.Attrs) // the cache's bases, as in rename
	if err != nil {
		return f.errno(ctx, "rename", from, err)
	}
	f.names.Forget(from)
	f.names.Forget(to)
	retireLinks() // as in Rename
	for _, n := range movingFrom {
		n.renamed(to, baseTo)
	}
	for _, n := range movingTo {
		n.renamed(from, baseFrom)
	}
	return 0
}

// renameDir renames directory name of d to newName of np: every object
// under it takes the new prefix in the cache at once (cache.RenameDir),
// and the nodes the kernel holds under it follow. The target, if it
// exists, must be an empty directory.
func (d *dirNode) renameDir(ctx context.Context, name string, np *dirNode, newName string, flags uint32) syscall.Errno {
	f := d.fsys
	from, to := d.prefix()+name, np.prefix()+newName
	dst, err := f.names.Resolve(ctx, to, f.warnOnce)
	if err != nil {
		return f.errno(ctx, "rename", to, err)
	}
	switch {
	case dst.Kind == names.File:
		return syscall.ENOTDIR
	case dst.Kind == names.Dir && flags&renameNoReplace != 0:
		return syscall.EEXIST
	case dst.Kind == names.Dir:
		l, err := f.names.List(ctx, to+"/", f.warnOnce)
		if err != nil {
			return f.errno(ctx, "rename", to, err)
		}
		if len(l.Names()) > 0 {
			return syscall.ENOTEMPTY
		}
	}
	moved, err := f.cache.RenameDir(ctx, from+"/", to+"/")
	if err != nil {
		f.names.DirMoved(from+"/", to+"/") // the bucket may have renamed it
		return f.errno(ctx, "rename", from, err)
	}
	f.moveTree(d, name, from+"/", to+"/", moved)
	return 0
}

// moveTree makes what the file system knows under prefix from (the
// directory name of d) known under prefix to: the prefixes
// of directory nodes, the names of file nodes, remembered lookups. moved,
// if not nil, says the bucket renamed the folder itself (cache.RenameDir):
// a node of an object that moved with its content follows it to its new
// version; any other has no name any more.
func (f *FS) moveTree(d *dirNode, name, from, to string, moved map[string]cache.Moved) {
	f.nodesMu.Lock()
	var files []*fileNode
	for n, ns := range f.nodes {
		if strings.HasPrefix(n, from) {
			files = append(files, ns...)
		}
	}
	f.nodesMu.Unlock()
	for _, n := range files {
		rest, ok := strings.CutPrefix(n.objName(), from)
		if !ok {
			continue
		}
		m, found := moved[to+rest]
		switch {
		case moved == nil:
			n.renamed(to+rest, 0) // the new names are new objects
		case found:
			// What the node reads now: the name's local copy, or the
			// bucket's version (a node of an older version of this
			// mount's reads the newer local copy). With no local change
			// (the bucket renames the folder only then), both are the
			// version that moved.
			n.movedTo(m.New)
		default:
			// The bucket moved a version other than the node's: the node
			// has no name now; the kernel's next lookup finds the object.
			n.markUnlinked(n.getAttrs())
		}
	}

	// The directory nodes of the kernel's tree under the moved one.
	if in := d.GetChild(name); in != nil {
		todo := []*gofs.Inode{in}
		for len(todo) > 0 {
			in := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			if s, ok := in.Operations().(*symlinkNode); ok {
				f.retire(s.ino) // as in Rename
			}
			dn, ok := in.Operations().(*dirNode)
			if !ok {
				continue
			}
			f.retire(in.StableAttr().Ino) // its number is its old prefix's (inodes.go)
			dn.mu.Lock()
			if rest, ok := strings.CutPrefix(dn.pfx, from); ok {
				dn.pfx = to + rest
			}
			dn.mu.Unlock()
			for _, c := range in.Children() {
				todo = append(todo, c)
			}
		}
	}
	f.names.DirRenamed(from, to)
}

// nodeSnapshots are file nodes with what they looked like before a
// change of their name.
type nodeSnapshots map[*fileNode]transfer.ObjectAttrs

// fileNodes returns the nodes the kernel has for object name, and what
// they look like now.
func (f *FS) fileNodes(name string) nodeSnapshots {
	out := nodeSnapshots{}
	for _, n := range f.nodesNamed(name) {
		out[n] = n.currentAttrs()
	}
	return out
}

// unlinked tells the nodes that their name is gone: handles open on them
// live on, with what they looked like before.
func (s nodeSnapshots) unlinked() {
	for n, a := range s {
		n.markUnlinked(a)
	}
}

// Link implements gofs.NodeLinker: hard links are not supported (an
// object store has one name per object); EPERM is link(2)'s answer for
// a filesystem without them (docs/design.md, limits). git, cp and rsync then
// copy instead.
func (d *dirNode) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if errno := d.newNameErrno(name); errno != 0 {
		return nil, errno // a name no file could have: as for any new name
	}
	return nil, syscall.EPERM
}

// renameNoReplace and renameExchange are RENAME_NOREPLACE and
// RENAME_EXCHANGE from renameat2(2).
const (
	renameNoReplace = 1
	renameExchange  = 2
)
