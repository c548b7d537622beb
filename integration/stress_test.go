package integration

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestConcurrentProcessesStress: several workers (as an outside stress
// suite runs several processes) create, write, append, truncate, rename,
// delete, chmod, lchown, symlink, mkfifo, read and list the same few
// names at once, with uploads running beside them. No operation may fail
// with EIO (each such failure was a bug: a panic in the prefetcher, a
// write handle joining an entry that the end of a deletion had dropped
// or a rename had replaced, a lutimes of a link just deleted), and after
// a flush the bucket, seen by a new mount with an empty cache, holds what
// the mount shows. ESTALE is allowed (and counted in the log): an open
// whose name is deleted or replaced under it twice in a row (the kernel
// retries once) answers it.
func TestConcurrentProcessesStress(t *testing.T) {
	emu := startEmulator(t, nil)
	m := mount(t, emu, mountOpts{args: []string{"--write-back-delay", "100ms", "--allow-other"}})
	root := m.path("st")
	dirs := []string{"", "d1", "d2", "d1/s", "d2/t"}
	for _, d := range dirs[1:] {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const workers, ops = 4, 1500
	var mu sync.Mutex
	failures, stale := map[string]int{}, map[string]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 17))
			for range ops {
				op, err := stressOp(r, root, dirs)
				mu.Lock()
				switch {
				case errors.Is(err, syscall.EIO):
					failures[op]++
				case errors.Is(err, syscall.ESTALE):
					stale[op]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Errorf("operations that failed with EIO: %v", failures)
	}
	t.Logf("%d operations by %d workers; ESTALE (allowed): %v", workers*ops, workers, stale)
	if code, out := runBucketfs(t, nil, "flush", m.dir); code != 0 {
		t.Fatalf("flush: exit %d\n%s", code, out)
	}
	got := readTree(t, root)
	other := mount(t, emu, mountOpts{})
	if want := readTree(t, other.path("st")); !reflect.DeepEqual(got, want) {
		t.Errorf("the mount shows\n%v\nthe bucket (a new mount) holds\n%v", got, want)
	}
	other.unmount(t)
	m.unmount(t)
	if log := m.logs.String(); strings.Contains(log, "level=ERROR") {
		t.Errorf("errors in the log:\n%s", log)
	}
}

// stressOp does one random operation under root and returns its name and
// error.
func stressOp(r *rand.Rand, root string, dirs []string) (string, error) {
	names := []string{"a", "b", "c", "d", "e", "f"}
	path := func() string { return filepath.Join(root, dirs[r.IntN(len(dirs))], names[r.IntN(len(names))]) }
	dir := func() string {
		return filepath.Join(root, dirs[r.IntN(len(dirs))], []string{"d1", "d2", "s", "t"}[r.IntN(4)])
	}
	data := func(max int) []byte {
		b := make([]byte, 1+r.IntN(max))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	writeAt := func(flags int, off int64, b []byte) error {
		fd, err := unix.Open(path(), flags|unix.O_NONBLOCK, 0o644)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if flags&unix.O_APPEND != 0 {
			_, err = unix.Write(fd, b)
		} else {
			_, err = unix.Pwrite(fd, b, off)
		}
		return err
	}
	switch op := r.IntN(15); op {
	case 0:
		return "write", writeAt(unix.O_RDWR, int64(r.IntN(70000)), data(20000))
	case 1:
		return "create", writeAt(unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, int64(r.IntN(100)), data(5000))
	case 2:
		return "append", writeAt(unix.O_WRONLY|unix.O_CREAT|unix.O_APPEND, 0, data(5000))
	case 3:
		return "truncate", unix.Truncate(path(), int64(r.IntN(90000)))
	case 4:
		return "rename", unix.Rename(path(), path())
	case 5:
		return "unlink", unix.Unlink(path())
	case 6:
		return "mkdir", unix.Mkdir(dir(), 0o755)
	case 7:
		return "rmdir", unix.Rmdir(dir())
	case 8:
		return "chmod", unix.Chmod(path(), []uint32{0o600, 0o644, 0o755, 0o4755}[r.IntN(4)])
	case 9:
		return "lchown", unix.Lchown(path(), []int{0, 65534, 1000}[r.IntN(3)], []int{0, 65534}[r.IntN(2)])
	case 10:
		return "symlink", unix.Symlink(names[r.IntN(len(names))], path())
	case 11:
		return "mkfifo", unix.Mkfifo(path(), 0o644)
	case 12:
		fd, err := unix.Open(path(), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
		if err != nil {
			return "read", err
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			return "read", err
		}
		_, err = unix.Pread(fd, make([]byte, 200000), 0)
		return "read", err
	case 13:
		_, err := os.ReadDir(filepath.Join(root, dirs[r.IntN(len(dirs))]))
		return "readdir", err
	default:
		ts := []unix.Timespec{{Sec: int64(r.IntN(1e9))}, {Sec: int64(r.IntN(1e9))}}
		return "lutimes", unix.UtimesNanoAt(unix.AT_FDCWD, path(), ts, unix.AT_SYMLINK_NOFOLLOW)
	}
}
