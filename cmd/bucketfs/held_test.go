package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/bucketfs/bucketfs/cache"
)

// A cache dir whose index another holder locks, with no control socket
// (fsck, or a mount starting or stopping): the start names the process
// from /proc/locks, and matches cache.ErrCacheInUse.
func TestHeldByWithoutSocket(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(cache.IndexPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if got := lockHolder(cache.IndexPath(dir)); got != os.Getpid() {
		t.Errorf("lockHolder = %d, want this process, %d", got, os.Getpid())
	}
	err = checkCacheFree(context.Background(), dir)
	if !errors.Is(err, cache.ErrCacheInUse) {
		t.Fatalf("checkCacheFree of a held dir: %v, want ErrCacheInUse", err)
	}
	for _, want := range []string{dir, fmt.Sprintf("process %d (", os.Getpid()), "did not answer on its control socket"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if err := checkCacheFree(context.Background(), filepath.Join(dir, "new")); err != nil {
		t.Errorf("checkCacheFree of a dir with no index: %v", err)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if err := checkCacheFree(context.Background(), dir); err != nil {
		t.Errorf("checkCacheFree once the lock is given back: %v", err)
	}
}
