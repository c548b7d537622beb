package warm

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/bucketfs/bucketfs/transfer"
)

// listParallel is how many pages of one long listing are asked for at
// once (transfer.ListAll).
const listParallel = 16

// UnderAny reports whether object name is one of prefixes or under one
// of them as a directory; "" is the whole bucket. A warm takes the
// objects it names; Unpin, the pins it ends.
func UnderAny(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if p == "" || name == p || strings.HasPrefix(name, p+"/") {
			return true
		}
	}
	return false
}

// listUnder lists every object of b under prefixes (see UnderAny), once
// each, biggest first so that the long fetches start at once. Directory
// placeholders ("dir/") are left out.
func listUnder(ctx context.Context, b transfer.Lister, prefixes []string) ([]transfer.ObjectAttrs, error) {
	seen := map[string]bool{}
	var out []transfer.ObjectAttrs
	for _, p := range prefixes {
		err := transfer.ListAll(ctx, b, transfer.ListQuery{Prefix: p}, listParallel, func(page transfer.ListPage) error {
			for _, a := range page.Objects {
				if strings.HasSuffix(a.Name, "/") || seen[a.Name] || !UnderAny(a.Name, []string{p}) {
					continue
				}
				seen[a.Name] = true
				out = append(out, a)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing %q: %w", p, err)
		}
	}
	sort.Slice(out, func(i, j int) bool { // pages come in any order: by name where sizes tie
		return out[i].Size > out[j].Size || out[i].Size == out[j].Size && out[i].Name < out[j].Name
	})
	return out, nil
}

// NoRoomError means the objects a warm was asked for do not fit in the
// cache beside the copies it cannot evict (changed files and pinned
// copies of other names). It matches the cache's no-space error
// (Warmer.NoSpace).
type NoRoomError struct {
	Need  int64 // the objects' bytes plus those kept
	Kept  int64 // bytes of copies that cannot be evicted, outside the set
	Max   int64 // the cache's cap (Warmer.MaxSize)
	Short int64 // Need - Max

	space error // what it matches: Warmer.NoSpace
}

func (e *NoRoomError) Error() string {
	return fmt.Sprintf("the objects do not fit in the cache: they need %d bytes beside the %d bytes of changed or pinned files kept, the cache holds %d; %d bytes are missing (raise --cache-max-size, or unpin)",
		e.Need-e.Kept, e.Kept, e.Max, e.Short)
}

func (e *NoRoomError) Is(target error) bool { return e.space != nil && target == e.space }

// roomFor checks that objs fit in the cache beside what it cannot evict.
func (w Warmer) roomFor(objs []transfer.ObjectAttrs) error {
	in := make(map[string]bool, len(objs))
	var need int64
	for _, a := range objs {
		in[a.Name] = true
		need += a.Size
	}
	kept := w.Cache.Kept(in)
	if need+kept > w.MaxSize {
		return &NoRoomError{Need: need + kept, Kept: kept, Max: w.MaxSize, Short: need + kept - w.MaxSize, space: w.NoSpace}
	}
	return nil
}
