package fs

import (
	"context"
	"strconv"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Ownership of new names. A file, directory or symbolic link made through
// the mount belongs to the process that made it, as on a local disk: its
// owner is the caller's fsuid, its group the caller's fsgid, or the
// directory's group where the directory is setgid (and a new directory
// there is setgid too: Linux's inode_init_owner). The kernel has already
// applied the umask and, for a setgid file made by someone outside the
// group, cleared the setgid bit (mode_strip_sgid) before the request
// reaches the daemon.
//
// Owner and mode are kept in the object's metadata (attrs.go), and only
// where they differ from what an object without them shows (--uid, --gid,
// --file-mode, --dir-mode): a mount used by its own user alone writes no
// more metadata than before.
//
// Permission checks are the kernel's: the mount uses default_permissions
// (FS.MountOptions), so the kernel checks every access, chown, chgrp
// (with the caller's supplementary groups), chmod, utimensat and sticky
// directory against the mode and owner shown here. What it leaves to
// the file system is to keep what it is told: owners at creation, and
// attribute changes of symbolic links (symlinkattr.go); and to clear
// setuid and setgid on write, truncate and chown when it says so
// (killpriv.go).

// newOwner is the metadata that gives a new name made in d by the
// caller of ctx its owner (none where the mount's defaults say it), and
// whether d is setgid (a new directory in it is setgid too).
func (d *dirNode) newOwner(ctx context.Context) (map[string]string, bool, syscall.Errno) {
	f := d.fsys
	uid, gid := f.opts.UID, f.opts.GID
	if c, ok := fuse.FromContext(ctx); ok {
		uid, gid = c.Uid, c.Gid
	}
	// The root has no object: its mode and group are the flags'.
	dirMode, dirGid := f.opts.DirMode, f.opts.GID
	if prefix := d.prefix(); prefix != "" {
		ph, _, err := f.names.DirAttrs(ctx, prefix)
		if err != nil {
			return nil, false, f.errno(ctx, "create", prefix, err)
		}
		var attr fuse.Attr
		f.fillDir(&attr, prefix, ph)
		dirMode, dirGid = attr.Mode, attr.Gid
	}
	sgid := dirMode&syscall.S_ISGID != 0
	if sgid {
		gid = dirGid
	}
	md := map[string]string{}
	if uid != f.opts.UID {
		md[uidKey] = strconv.FormatUint(uint64(uid), 10)
	}
	if gid != f.opts.GID {
		md[gidKey] = strconv.FormatUint(uint64(gid), 10)
	}
	return md, sgid, 0
}

// modeMeta adds perm to md if it is not def, the mount's default.
func modeMeta(md map[string]string, perm, def uint32) {
	if perm&0o7777 != def {
		md[modeKey] = strconv.FormatUint(uint64(perm&0o7777), 8)
	}
}
