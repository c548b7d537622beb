package fs

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "a.txt": true, "ünïcode ✓": true, strings.Repeat("x", 255): true,
		"": false, ".": false, "..": false, strings.Repeat("x", 256): false,
		"a/b": false, "nul\x00": false, "...": true,
	} {
		if got := validName(name); got != want {
			t.Errorf("validName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestParentPrefix(t *testing.T) {
	for name, want := range map[string]string{
		"a": "", "a/b": "a/", "a/b/c": "a/b/", "a//b": "a//",
	} {
		if got := parentPrefix(name); got != want {
			t.Errorf("parentPrefix(%q) = %q, want %q", name, got, want)
		}
	}
}

// listOnlyBucket answers List from objects; nothing else is called.
type listOnlyBucket struct {
	transfer.Bucket
	objects []transfer.ObjectAttrs
}

func (b *listOnlyBucket) List(ctx context.Context, q transfer.ListQuery) (transfer.ListPage, error) {
	return transfer.ListPage{Objects: b.objects}, nil
}

// racingLocal has one local change, d/f, whose upload is confirmed (and
// which leaves the overlay) at the moment the overlay asks about it.
type racingLocal struct {
	dirty     bool
	onConfirm func()
}

func (r *racingLocal) Local(name string) (transfer.ObjectAttrs, bool) {
	if f := r.onConfirm; f != nil {
		r.onConfirm = nil
		f()
	}
	if r.dirty {
		return transfer.ObjectAttrs{Name: name, Size: 1}, true
	}
	return transfer.ObjectAttrs{}, false
}

func (r *racingLocal) LocalNames(prefix string) (present, removed []string) {
	if r.dirty {
		return []string{"d/f"}, nil
	}
	return nil, nil
}

// A listing taken before an upload was confirmed, laid over with local
// changes after the file left them, must not lose the file (found by the
// model-based tester: a renamed file vanished from a listing).
func TestListingDoesNotLoseAFileConfirmedMeanwhile(t *testing.T) {
	b := &listOnlyBucket{}
	local := &racingLocal{dirty: true}
	m := newMetaCache(b, local, time.Minute)
	uploaded := transfer.ObjectAttrs{Name: "d/f", Size: 1, Generation: 7}
	local.onConfirm = func() {
		b.objects = []transfer.ObjectAttrs{uploaded}
		m.confirmed("d/f", uploaded, false)
		local.dirty = false
	}
	l, err := m.list(context.Background(), "d/", func(string, string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	if c := l.children["f"]; c.kind != kindFile {
		t.Errorf("d/ lists %v: the file confirmed while the listing was made is missing", l.names)
	}
}
