package transfer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	rawstorage "google.golang.org/api/storage/v1"
)

// Folder rename in a bucket with a hierarchical namespace: the JSON API's
// folders.rename starts a long-running operation that renames the folder
// and everything under it atomically (all or nothing), and operations.get
// says when it is done. Reference:
// https://cloud.google.com/storage/docs/json_api/v1/folders/rename and
// https://cloud.google.com/storage/docs/rename-hns-folders.

// hnsState caches whether the bucket has a hierarchical namespace.
type hnsState struct {
	mu    sync.Mutex
	known bool
	on    bool
}

// hierarchical reports whether the bucket has a hierarchical namespace,
// asking once (buckets.get). A refusal to say (the credentials may lack
// storage.buckets.get) counts as "no": the copy-and-delete way works in
// every bucket. Other errors are not remembered.
func (g *GCS) hierarchical(ctx context.Context) (bool, error) {
	g.hns.mu.Lock()
	defer g.hns.mu.Unlock()
	if g.hns.known {
		return g.hns.on, nil
	}
	a, err := g.h.Attrs(ctx)
	if err != nil {
		err = g.wrap("bucket attributes", "", err)
		if errors.Is(err, ErrPermission) {
			g.hns.known = true
		}
		return false, err
	}
	g.hns.known = true
	g.hns.on = a.HierarchicalNamespace != nil && a.HierarchicalNamespace.Enabled
	return g.hns.on, nil
}

// pollFolderOp bounds the wait between two looks at a running rename.
const pollFolderOp = 2 * time.Second

// RenameFolder implements Bucket with folders.rename, then polls the
// operation until it is done.
func (g *GCS) RenameFolder(ctx context.Context, from, to string) error {
	wrap := func(err error) error { return &OpError{Op: "rename folder", Bucket: g.name, Object: from, Err: err} }
	if !strings.HasSuffix(from, "/") || !strings.HasSuffix(to, "/") || from == "/" || to == "/" {
		return wrap(fmt.Errorf("%w: folder names must end in '/' (%q to %q)", ErrNotRenamed, from, to))
	}
	on, err := g.hierarchical(ctx)
	if err != nil && !errors.Is(err, ErrPermission) {
		return wrap(fmt.Errorf("%w: %v", ErrNotRenamed, err))
	}
	if !on {
		return wrap(ErrNotSupported)
	}
	op, err := g.raw.Folders.Rename(g.name, from, to).Context(ctx).Do()
	if err != nil {
		var ge *googleapi.Error
		if errors.As(err, &ge) && ge.Code >= 400 && ge.Code < 500 && ge.Code != http.StatusRequestTimeout {
			// Refused: nothing started.
			return wrap(fmt.Errorf("%w: %w", ErrNotRenamed, classify(err)))
		}
		return wrap(classify(err))
	}
	id := op.Name[strings.LastIndex(op.Name, "/")+1:]
	wait := 50 * time.Millisecond
	failures := 0
	for !op.Done {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return wrap(fmt.Errorf("waiting for operation %s: %w", op.Name, ctx.Err()))
		case <-t.C:
		}
		wait = min(wait*2, pollFolderOp)
		next, err := g.raw.Operations.Get(g.name, id).Context(ctx).Do()
		if err != nil {
			// The rename goes on whatever happens to this look at it.
			if failures++; failures > 10 || ctx.Err() != nil {
				return wrap(fmt.Errorf("waiting for operation %s: %w", op.Name, classify(err)))
			}
			continue
		}
		failures = 0
		op = next
	}
	if op.Error != nil {
		// Done with an error: everything is as it was (the operation is
		// atomic).
		return wrap(fmt.Errorf("%w: operation %s failed: %s (code %d)", ErrNotRenamed, op.Name, op.Error.Message, op.Error.Code))
	}
	return nil
}

// DeleteEmptyFolders implements Bucket with folders.delete, which GCS
// refuses for a folder that is not empty. The folder itself is tried
// first (after an rmdir, the usual case, it is all there is); if it is
// not empty, the folders under it (folders.list) are deleted deepest
// first, then it again.
func (g *GCS) DeleteEmptyFolders(ctx context.Context, prefix string) error {
	wrap := func(err error) error { return &OpError{Op: "delete folders", Bucket: g.name, Object: prefix, Err: err} }
	if !strings.HasSuffix(prefix, "/") || prefix == "/" {
		return wrap(fmt.Errorf("folder names end in '/' (%q)", prefix))
	}
	on, err := g.hierarchical(ctx)
	if err != nil && !errors.Is(err, ErrPermission) {
		return wrap(err)
	}
	if !on {
		return wrap(ErrNotSupported)
	}
	empty, err := g.deleteFolder(ctx, prefix)
	if err != nil || empty {
		return err
	}
	var under []string
	err = g.raw.Folders.List(g.name).Prefix(prefix).Context(ctx).Pages(ctx, func(page *rawstorage.Folders) error {
		for _, f := range page.Items {
			if f.Name != prefix && strings.HasPrefix(f.Name, prefix) {
				under = append(under, f.Name)
			}
		}
		return nil
	})
	if err != nil {
		return wrap(classify(err))
	}
	// Deepest first; a folder that stays keeps those above it.
	sort.Slice(under, func(i, j int) bool {
		di, dj := strings.Count(under[i], "/"), strings.Count(under[j], "/")
		if di != dj {
			return di > dj
		}
		return under[i] > under[j]
	})
	stays := map[string]bool{}
	for _, f := range append(under, prefix) {
		if stays[f] {
			continue
		}
		empty, err := g.deleteFolder(ctx, f)
		if err != nil {
			return err
		}
		if !empty {
			for p := parentFolder(f); strings.HasPrefix(p, prefix); p = parentFolder(p) {
				stays[p] = true
			}
		}
	}
	return nil
}

// deleteFolder deletes folder name if it is empty; empty reports whether
// it is gone (deleted, or not there).
func (g *GCS) deleteFolder(ctx context.Context, name string) (empty bool, err error) {
	err = g.raw.Folders.Delete(g.name, name).Context(ctx).Do()
	var ge *googleapi.Error
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ge) && ge.Code == http.StatusNotFound:
		return true, nil
	case errors.As(err, &ge) && (ge.Code == http.StatusConflict || ge.Code == http.StatusPreconditionFailed || ge.Code == http.StatusBadRequest):
		return false, nil // not empty
	}
	return false, &OpError{Op: "delete folder", Bucket: g.name, Object: name, Err: classify(err)}
}

// parentFolder returns the folder holding folder f ("a/b/" -> "a/"; "" at
// the top).
func parentFolder(f string) string {
	i := strings.LastIndex(strings.TrimSuffix(f, "/"), "/")
	return f[:i+1]
}

// newRawService makes a client of the JSON API itself, for the calls the
// storage client does not have (folders, operations), with g's transport.
func newRawService(ctx context.Context, hc *http.Client, endpoint, userAgent string) (*rawstorage.Service, error) {
	opts := []option.ClientOption{option.WithHTTPClient(hc)}
	if endpoint != "" {
		opts = append(opts, option.WithEndpoint(endpoint))
	}
	if userAgent != "" {
		opts = append(opts, option.WithUserAgent(userAgent))
	}
	s, err := rawstorage.NewService(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating the JSON API client: %w", err)
	}
	return s, nil
}
