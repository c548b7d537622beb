package fs

// Clearing setuid and setgid is the file system's job (FUSE
// HANDLE_KILLPRIV_V2, asked for in MountOptions). Without it the kernel
// asks for the security.capability attribute before every write(2) of a
// file, to see whether the write must drop it: a second round trip to
// the daemon per write (1,000 4 KiB writes: 1,000 WRITE and 1,000
// GETXATTR requests, measured 2026-11-27 with --debug-fuse). With it the
// kernel marks the superblock SB_NOSEC and, after an inode's first
// check, writes to it carry no such question; it tells the file system
// instead when a change must clear the bits, and the file system does it:
//
//   - a WRITE from a caller without CAP_FSETID carries
//     WRITE_KILL_SUIDGID (go-fuse's node API drops the flag, so
//     killprivFS acts on it below the node API);
//   - a SETATTR of a size by such a caller, or of an owner or group of a
//     file by anyone, carries FATTR_KILL_SUIDGID (fileNode.Setattr).
//
// As Linux does for a local file (should_remove_suid), setuid goes, and
// setgid only where group-execute is set (setgid without it marks
// mandatory locking, not a privilege).

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// withoutSuidgid returns mode without the bits a change by an
// unprivileged caller clears, and whether there were any.
func withoutSuidgid(mode uint32) (uint32, bool) {
	kill := uint32(syscall.S_ISUID)
	if mode&syscall.S_IXGRP != 0 {
		kill |= syscall.S_ISGID
	}
	return mode &^ kill, mode&kill != 0
}

// killprivFS clears setuid and setgid of a file written with
// WRITE_KILL_SUIDGID before the write, through the file system's own
// getattr and setattr (the mode is metadata of the object, attrs.go).
type killprivFS struct {
	fuse.RawFileSystem
}

// killBefore clears the bits of the file in.NodeId if the write asks
// for it; a failure fails the write (a write that should have dropped a
// privilege must not land without doing so).
func (k *killprivFS) killBefore(cancel <-chan struct{}, in *fuse.WriteIn) fuse.Status {
	if in.WriteFlags&fuse.WRITE_KILL_SUIDGID == 0 {
		return fuse.OK
	}
	var attr fuse.AttrOut
	if s := k.RawFileSystem.GetAttr(cancel, &fuse.GetAttrIn{InHeader: in.InHeader}, &attr); !s.Ok() {
		return s
	}
	mode, kill := withoutSuidgid(attr.Mode)
	if !kill {
		return fuse.OK
	}
	set := &fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{InHeader: in.InHeader, Valid: fuse.FATTR_MODE, Mode: mode}}
	return k.RawFileSystem.SetAttr(cancel, set, &attr)
}

func (k *killprivFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	if s := k.killBefore(cancel, in); !s.Ok() {
		return 0, s
	}
	return k.RawFileSystem.Write(cancel, in, data)
}

func (k *killprivFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	if s := k.killBefore(cancel, in); !s.Ok() {
		return 0, s
	}
	return k.RawFileSystem.Writev(cancel, in, data)
}
