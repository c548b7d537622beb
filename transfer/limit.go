package transfer

import (
	"context"
	"io"
)

// Limited caps the number of requests in flight to the wrapped bucket, over
// all callers. A ReadRange holds its slot until its bytes are copied.
// Range reads a reader waits for (Foreground) may also take one of a few
// slots kept for them: background reads that hold every shared slot (and
// pause while a reader waits, Priority) cannot keep a reader's request
// from going out.
type Limited struct {
	b   Bucket
	sem chan struct{}
	fg  chan struct{} // the slots kept for foreground range reads
}

type foregroundKey struct{}

// Foreground marks ctx as a reader's: its range reads may use the slots
// Limited keeps for them.
func Foreground(ctx context.Context) context.Context {
	return context.WithValue(ctx, foregroundKey{}, true)
}

func isForeground(ctx context.Context) bool { return ctx.Value(foregroundKey{}) != nil }

var _ Bucket = (*Limited)(nil)

// NewLimited wraps b so that at most n calls run at once (n >= 1).
func NewLimited(b Bucket, n int) *Limited {
	if n < 1 {
		n = 1
	}
	return &Limited{b: b, sem: make(chan struct{}, n), fg: make(chan struct{}, max(n/4, 1))}
}

// acquireRead takes a slot for a range read: a shared one, or for a
// foreground read one kept for them; the returned func gives it back.
func (l *Limited) acquireRead(ctx context.Context) (func(), error) {
	if !isForeground(ctx) {
		if err := l.acquire(ctx); err != nil {
			return nil, err
		}
		return l.release, nil
	}
	select {
	case l.sem <- struct{}{}:
		return l.release, nil
	default:
	}
	select {
	case l.sem <- struct{}{}:
		return l.release, nil
	case l.fg <- struct{}{}:
		return func() { <-l.fg }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *Limited) acquire(ctx context.Context) error {
	select {
	case l.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Limited) release() { <-l.sem }

// Name implements Bucket.
func (l *Limited) Name() string { return l.b.Name() }

// Stat implements Bucket.
func (l *Limited) Stat(ctx context.Context, name string) (ObjectAttrs, error) {
	if err := l.acquire(ctx); err != nil {
		return ObjectAttrs{}, err
	}
	defer l.release()
	return l.b.Stat(ctx, name)
}

// List implements Bucket.
func (l *Limited) List(ctx context.Context, q ListQuery) (ListPage, error) {
	if err := l.acquire(ctx); err != nil {
		return ListPage{}, err
	}
	defer l.release()
	return l.b.List(ctx, q)
}

// ReadRange implements Bucket.
func (l *Limited) ReadRange(ctx context.Context, name string, gen, off, length int64, w io.Writer) (int64, error) {
	release, err := l.acquireRead(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	return l.b.ReadRange(ctx, name, gen, off, length, w)
}

// Put implements Bucket.
func (l *Limited) Put(ctx context.Context, name string, r io.Reader, o PutOptions) (ObjectAttrs, error) {
	if err := l.acquire(ctx); err != nil {
		return ObjectAttrs{}, err
	}
	defer l.release()
	return l.b.Put(ctx, name, r, o)
}

// Compose implements Bucket.
func (l *Limited) Compose(ctx context.Context, dst string, srcs []string, o PutOptions) (ObjectAttrs, error) {
	if err := l.acquire(ctx); err != nil {
		return ObjectAttrs{}, err
	}
	defer l.release()
	return l.b.Compose(ctx, dst, srcs, o)
}

// Copy implements Bucket.
func (l *Limited) Copy(ctx context.Context, src string, srcGen int64, dst string, o PutOptions) (ObjectAttrs, error) {
	if err := l.acquire(ctx); err != nil {
		return ObjectAttrs{}, err
	}
	defer l.release()
	return l.b.Copy(ctx, src, srcGen, dst, o)
}

// RenameFolder implements Bucket.
func (l *Limited) RenameFolder(ctx context.Context, from, to string) error {
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer l.release()
	return l.b.RenameFolder(ctx, from, to)
}

// DeleteEmptyFolders implements Bucket.
func (l *Limited) DeleteEmptyFolders(ctx context.Context, prefix string) error {
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer l.release()
	return l.b.DeleteEmptyFolders(ctx, prefix)
}

// SetMetadata implements Bucket.
func (l *Limited) SetMetadata(ctx context.Context, name string, gen int64, md map[string]string) (ObjectAttrs, error) {
	if err := l.acquire(ctx); err != nil {
		return ObjectAttrs{}, err
	}
	defer l.release()
	return l.b.SetMetadata(ctx, name, gen, md)
}

// Delete implements Bucket.
func (l *Limited) Delete(ctx context.Context, name string, gen int64) error {
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer l.release()
	return l.b.Delete(ctx, name, gen)
}

// CheckAccess implements Bucket.
func (l *Limited) CheckAccess(ctx context.Context) error {
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer l.release()
	return l.b.CheckAccess(ctx)
}
