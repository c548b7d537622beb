// Package testutil holds the helpers that the tests of several packages
// share: deadlines, deterministic test data, and finding versitygw. Only
// tests import it. It imports nothing of bucketfs, so that the tests of
// any package (internal/emulator's included) can use it without an import
// cycle; the emulator helpers are in testutil/testemu.
package testutil

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Ctx returns a context that ends after d, and with the test; d should end
// it before the test binary's -timeout, so that a stuck test fails with
// its own message instead of a panic dump.
func Ctx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Pattern returns n deterministic bytes (xorshift32); different seeds
// differ. Tests compare what they read against these bytes, so the
// sequence must not change.
func Pattern(n int, seed uint32) []byte {
	b := make([]byte, n)
	x := seed*2654435761 + 2463534242
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// RandomBytes returns n deterministic pseudo-random bytes (PCG seeded by
// seed): unlike Pattern, they do not compress, and a seed reproduces them.
func RandomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// ErrNoVersitygw is returned by FindVersitygw when versitygw is not
// installed; callers say which tests need it.
var ErrNoVersitygw = errors.New("versitygw is neither on PATH nor in $(go env GOPATH)/bin")

// FindVersitygw looks for versitygw (the S3-compatible server the XML
// multipart code is tested against) on PATH, then in the bin directories
// of GOPATH, where scripts/deps.sh's `go install` puts it.
func FindVersitygw() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(dir, "bin", "versitygw")
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	return "", ErrNoVersitygw
}

// FlipByte returns a damage function for tests of a damaged cache: it
// inverts every bit of the byte at off of the file at path.
func FlipByte(off int64) func(path string) error {
	return func(path string) error {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, off); err != nil {
			return err
		}
		b[0] ^= 0xff
		_, err = f.WriteAt(b, off)
		return err
	}
}
