package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/bucketfs/bucketfs/internal/mountinfo"
)

// How a command finds the socket of the mount on a directory: the mount
// writes a Record to RunDir()/mounts/ESCAPED.json, ESCAPED being the
// mountpoint's absolute, symlink-free path, escaped as a URL path
// segment; it removes it at exit. The mountpoint alone does not say where
// the cache directory is (the kernel's mount table shows only
// "bucketfs:BUCKET"), hence the record. A record left by a crash is
// recognised: its process is gone, or the directory is not a bucketfs
// mount any more.

// Record is what a mount writes about itself for the commands.
type Record struct {
	Mountpoint string `json:"mountpoint"`
	Socket     string `json:"socket"`
	CacheDir   string `json:"cache_dir"`
	Bucket     string `json:"bucket"`
	PID        int    `json:"pid"`
}

// RunDir is where mounts record their sockets: /run/bucketfs for root,
// else $XDG_RUNTIME_DIR/bucketfs, else /tmp/bucketfs-UID.
func RunDir() string {
	if os.Geteuid() == 0 {
		return "/run/bucketfs"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "bucketfs")
	}
	return filepath.Join(os.TempDir(), "bucketfs-"+strconv.Itoa(os.Geteuid()))
}

func recordPath(mountpoint string) string {
	return filepath.Join(RunDir(), "mounts", url.PathEscape(mountpoint)+".json")
}

// Register writes r for r.Mountpoint (absolute, symlinks resolved) and
// returns the function that removes it.
func Register(r Record) (func(), error) {
	p := recordPath(r.Mountpoint)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, fmt.Errorf("recording the control socket: %w", err)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	tmp := p + ".tmp" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("recording the control socket: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("recording the control socket: %w", err)
	}
	return func() {
		// Only ours: a later mount on the same directory may have
		// replaced it.
		if cur, err := readRecord(p); err == nil && cur.PID == r.PID {
			os.Remove(p)
		}
	}, nil
}

func readRecord(p string) (Record, error) {
	var r Record
	data, err := os.ReadFile(p)
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(data, &r)
}

// Lookup finds the socket of the bucketfs mount on dir. Its errors say
// what is there instead: nothing mounted, another file system, or a
// bucketfs whose record is missing or stale.
func Lookup(dir string) (Record, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Record{}, err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	m, mounted, err := mountinfo.Lookup(abs)
	fstype := m.FSType
	if err != nil {
		return Record{}, err
	}
	if !mounted {
		return Record{}, fmt.Errorf("nothing is mounted on %s", abs)
	}
	if fstype != "fuse.bucketfs" {
		return Record{}, fmt.Errorf("%s is not a bucketfs mount (it is %s)", abs, fstype)
	}
	p := recordPath(abs)
	r, err := readRecord(p)
	if errors.Is(err, os.ErrNotExist) {
		return Record{}, fmt.Errorf("bucketfs is mounted on %s, but no control socket is recorded for it in %s (mounted by another user, or by an older bucketfs?); pass --cache-dir", abs, filepath.Dir(p))
	}
	if err != nil {
		return Record{}, fmt.Errorf("reading %s: %w", p, err)
	}
	if r.PID > 0 && syscall.Kill(r.PID, 0) == syscall.ESRCH {
		return Record{}, fmt.Errorf("the bucketfs that mounted %s (pid %d) is gone; the mount is dead: clear it with 'fusermount3 -uz %s'", abs, r.PID, abs)
	}
	return r, nil
}
