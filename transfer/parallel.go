package transfer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bucketfs/bucketfs/internal/crc32c"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
)

// StagingPrefix is where parallel uploads keep their parts until the
// object is assembled. The file system hides it.
const StagingPrefix = ".bucketfs-staging/"

// Limits of the XML multipart API (GCS and S3 alike).
const (
	MinPartSize = 5 << 20 // every part but the last
	MaxParts    = 10000
)

// Defaults of ParallelOptions.
const (
	DefaultPartSize        = 16 << 20
	DefaultPartParallelism = 16
)

// MultipartAPI is the XML multipart upload API, as *Multipart implements
// it; the contracts are on *Multipart's methods.
type MultipartAPI interface {
	Initiate(ctx context.Context, name string) (uploadID string, err error)
	UploadPart(ctx context.Context, name, uploadID string, n int, r io.ReaderAt, size int64, sum uint32) (etag string, err error)
	Complete(ctx context.Context, name, uploadID string, parts []CompletedPart) (ObjectAttrs, error)
	Abort(ctx context.Context, name, uploadID string) error
	ListUploads(ctx context.Context, prefix string) ([]PendingUpload, error)
}

// ParallelOptions configure a Parallel uploader.
type ParallelOptions struct {
	// PartSize is the bytes per part (DefaultPartSize if 0). It is raised
	// to MinPartSize for the XML API and so that an object fits in
	// MaxParts parts.
	PartSize int64
	// Parallelism is how many parts are in flight over all the uploads
	// of this uploader (DefaultPartParallelism if 0).
	Parallelism int
	// Multipart is the XML multipart API of the bucket's endpoint; nil if
	// it has none. If it answers ErrMultipartUnsupported, the uploader
	// switches to composing for good and logs it once.
	Multipart MultipartAPI
	Logger    *slog.Logger
	// RetryBase is the first wait before a part is sent again (500ms if
	// 0); each further try waits twice as long.
	RetryBase time.Duration
	// NoStaging makes Put send the object as one resumable upload
	// (PutOptions.Resumable), nothing staged: for a bucket whose
	// retention policy or default event-based hold would keep (and bill)
	// every staged part (DeletionRules.HoldsDeletes).
	NoStaging bool
}

// Parallel uploads large objects as parts sent in parallel, then puts the
// whole into place in one conditional step, so that a precondition guards
// the object as it guards a single-request upload.
//
// Two paths, chosen automatically:
//
//   - XML multipart (GCS): the parts go to a multipart upload of a staging
//     object; once completed, a one-source Compose with the caller's
//     precondition copies it into place inside the store.
//   - Compose (endpoints without the XML API, such as emulators, and
//     buckets that refuse to compose an object the XML API made, see
//     place.go): every part is a staging object of its own (a
//     single-request Put); Compose joins them, 32 at a time, into
//     intermediate staging objects and at last into place with the
//     caller's precondition.
//
// A compose into place that took effect but whose answer was lost is
// recognised by the caller's metadata (its upload ID) on the object in
// place (place.go).
//
// Everything staged lives under one staging prefix per upload attempt
// (NewStaging). Every compose deletes its sources itself
// (PutOptions.DeleteSources), so a Put that succeeds leaves nothing
// staged, and nothing for soft delete to keep. What a failed Put leaves,
// Put does not clean up: the caller records the prefix durably before
// Put, so that a crash cannot leak it, and calls Clean after Put,
// whatever the outcome.
//
// Parts are retried one by one with backoff; a refusal (permission,
// precondition, missing bucket or upload) is not retried. Methods are safe
// for concurrent use.
type Parallel struct {
	b     Bucket
	o     ParallelOptions
	slots *semaphore.Weighted // a unit per part in flight, over all uploads

	noXML    atomic.Bool // the endpoint answered ErrMultipartUnsupported
	logOnce  sync.Once
	listOnce sync.Once
	// noXMLCompose: the bucket refused to compose an object made by the
	// XML API (place.go). Unlike noXML, Clean still aborts multipart
	// uploads (a crash may have left some).
	noXMLCompose atomic.Bool
	composeOnce  sync.Once

	maxComposedPart int64 // maxComposedPart; smaller in tests
}

// NewParallel returns an uploader into b.
func NewParallel(b Bucket, o ParallelOptions) *Parallel {
	if o.PartSize <= 0 {
		o.PartSize = DefaultPartSize
	}
	if o.Parallelism <= 0 {
		o.Parallelism = DefaultPartParallelism
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RetryBase <= 0 {
		o.RetryBase = 500 * time.Millisecond
	}
	return &Parallel{b: b, o: o, slots: semaphore.NewWeighted(int64(o.Parallelism)), maxComposedPart: maxComposedPart}
}

// NewStaging returns a fresh staging prefix for one upload attempt.
func NewStaging() string {
	var r [8]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read does not fail (Go >= 1.24)
	return StagingPrefix + hex.EncodeToString(r[:]) + "/"
}

// validStaging reports whether s has the form NewStaging gives, so that a
// bad record can never make Clean delete more than one upload's parts.
func validStaging(s string) bool {
	id, ok := strings.CutPrefix(s, StagingPrefix)
	id, ok2 := strings.CutSuffix(id, "/")
	if !ok || !ok2 || len(id) != 16 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// Put uploads the size bytes of r as the object name under the conditions
// of o, staging parts under staging (from NewStaging), and returns the new
// version's attributes. r is read concurrently (ReadAt) until Put returns.
// A precondition that does not hold is ErrPrecondition, and then the
// object is left as it was.
func (p *Parallel) Put(ctx context.Context, name string, r io.ReaderAt, size int64, o PutOptions, staging string) (ObjectAttrs, error) {
	if !validStaging(staging) {
		return ObjectAttrs{}, fmt.Errorf("parallel upload of %s: staging prefix %q is not one of NewStaging's", name, staging)
	}
	if p.o.NoStaging {
		o.Resumable = true
		return p.b.Put(ctx, name, io.NewSectionReader(r, 0, size), o)
	}
	if o.ContentType == "" {
		// A compose has no body to sniff: the type a single Put would
		// get, found the same way, so that the object is the same
		// whatever its size.
		ct, err := sniffContentType(r, size)
		if err != nil {
			return ObjectAttrs{}, fmt.Errorf("parallel upload of %s: %w", name, err)
		}
		o.ContentType = ct
	}
	if p.o.Multipart != nil && !p.noXML.Load() && !p.noXMLCompose.Load() {
		a, err := p.putXML(ctx, name, r, size, o, staging)
		if !errors.Is(err, ErrMultipartUnsupported) && !refusedInitiate(err) {
			return a, err
		}
		p.markNoXML(err)
	}
	return p.putComposed(ctx, name, r, size, o, staging)
}

// refusedInitiate reports whether err is a refusal to start a multipart
// upload: credentials allowed to write objects but not to use the XML
// multipart API (storage.multipartUploads.create). Composing needs only
// object permissions.
func refusedInitiate(err error) bool {
	var oe *OpError
	return errors.As(err, &oe) && oe.Op == "initiate" && errors.Is(err, ErrPermission)
}

// markNoXML switches to composing for good.
func (p *Parallel) markNoXML(err error) {
	p.noXML.Store(true)
	p.logOnce.Do(func() {
		p.o.Logger.Info("no XML multipart API at the bucket's endpoint (or the credentials may not use it): large files are uploaded as parallel parts composed into place", "reason", err)
	})
}

// part is one byte range of the object.
type part struct{ off, n int64 }

// split cuts size bytes into parts of at least least bytes (but the last),
// of the configured size, and no more than MaxParts. With chunk > 0 (the
// caller's ChunkSums), a part is a whole number of chunks, so that its
// checksum is known without reading it.
func (p *Parallel) split(size, least, chunk int64) []part {
	ps := max(p.o.PartSize, least, (size+MaxParts-1)/MaxParts)
	if chunk > 0 && ps%chunk != 0 {
		ps += chunk - ps%chunk
	}
	var parts []part
	for off := int64(0); off < size; off += ps {
		parts = append(parts, part{off, min(ps, size-off)})
	}
	return parts
}

// putXML is the XML multipart path.
func (p *Parallel) putXML(ctx context.Context, name string, r io.ReaderAt, size int64, o PutOptions, staging string) (ObjectAttrs, error) {
	mp := p.o.Multipart
	obj := staging + "object"
	var id string
	err := p.retry(ctx, func() error {
		var err error
		id, err = mp.Initiate(ctx, obj)
		return err
	})
	if err != nil {
		return ObjectAttrs{}, err
	}
	parts := p.split(size, MinPartSize, o.Chunks.Chunk)
	done := make([]CompletedPart, len(parts))
	err = p.inParallel(ctx, len(parts), func(ctx context.Context, i int) error {
		sum, err := partSum(ctx, r, size, parts[i], o)
		if err != nil {
			return err
		}
		return p.retry(ctx, func() error {
			etag, err := mp.UploadPart(ctx, obj, id, i+1, io.NewSectionReader(r, parts[i].off, parts[i].n), parts[i].n, sum)
			done[i] = CompletedPart{Number: i + 1, ETag: etag}
			return err
		})
	})
	if err != nil {
		return ObjectAttrs{}, err
	}
	tries := 0
	err = p.retry(ctx, func() error {
		tries++
		_, err := mp.Complete(ctx, obj, id, done)
		if tries > 1 && errors.Is(err, ErrNotExist) {
			return nil // an earlier try completed it; the size check below tells
		}
		return err
	})
	if err != nil {
		return ObjectAttrs{}, err
	}
	if err := p.checkStaged(ctx, obj, size, o); err != nil {
		return ObjectAttrs{}, err
	}
	o.DeleteSources = true // nothing staged is left to delete (and bill)
	a, err := p.composeInPlace(ctx, name, []string{obj}, size, o)
	if errors.Is(err, ErrInvalid) {
		return p.putInsteadOfXMLCompose(ctx, name, r, size, o, obj, err)
	}
	return a, err
}

// maxComposedPart bounds how far the compose path grows parts to save a
// tier of composes.
const maxComposedPart = 256 << 20

// putComposed is the compose path.
func (p *Parallel) putComposed(ctx context.Context, name string, r io.ReaderAt, size int64, o PutOptions, staging string) (ObjectAttrs, error) {
	// Parts grow (up to maxComposedPart) so that one compose can join
	// them: every tier of composes rewrites the whole object on servers
	// that copy bytes to compose (emulators do).
	parts := p.split(size, min((size+MaxComposeSources-1)/MaxComposeSources, p.maxComposedPart), o.Chunks.Chunk)
	if len(parts) <= 1 {
		return p.b.Put(ctx, name, io.NewSectionReader(r, 0, size), o)
	}
	start := time.Now()
	srcs := make([]string, len(parts))
	sums := make([]uint32, len(parts))
	err := p.inParallel(ctx, len(parts), func(ctx context.Context, i int) error {
		srcs[i] = fmt.Sprintf("%spart-%05d", staging, i+1)
		po := PutOptions{Unconditional: true}
		if o.SendCRC32C {
			// Each part is checked by the store as it lands: the object
			// composed of them is then what was read, whole.
			sum, err := partSum(ctx, r, size, parts[i], o)
			if err != nil {
				return err
			}
			po.CRC32C, po.SendCRC32C, sums[i] = sum, true, sum
		}
		return p.retry(ctx, func() error {
			a, err := p.b.Put(ctx, srcs[i], io.NewSectionReader(r, parts[i].off, parts[i].n), po)
			if err == nil && a.Size != parts[i].n {
				err = fmt.Errorf("part %d of %s: the store holds %d bytes, %d were sent", i+1, name, a.Size, parts[i].n)
			}
			return err
		})
	})
	if err != nil {
		return ObjectAttrs{}, err
	}
	p.o.Logger.Debug("parts staged", "object", name, "parts", len(parts), "bytes", size, "took", time.Since(start))
	if o.SendCRC32C {
		var whole uint32
		for i, sum := range sums {
			whole = crc32c.Combine(whole, sum, parts[i].n)
		}
		if whole != o.CRC32C {
			// Parts read after the caller's sum: the file changed meanwhile.
			return ObjectAttrs{}, fmt.Errorf("parallel upload of %s: the parts sent have CRC32C %08x, the file %08x: %w", name, whole, o.CRC32C, ErrChecksum)
		}
	}
	start = time.Now()
	srcs, err = p.composeTiers(ctx, srcs, staging)
	if err != nil {
		return ObjectAttrs{}, err
	}
	o.DeleteSources = true
	a, err := p.composeInPlace(ctx, name, srcs, size, o)
	p.o.Logger.Debug("parts composed", "object", name, "took", time.Since(start), "err", err)
	if err == nil && a.Size != size {
		err = fmt.Errorf("parallel upload of %s: the composed object has %d bytes, %d were sent", name, a.Size, size)
	}
	if err == nil && o.SendCRC32C && reportsCRC(a) && a.CRC32C != o.CRC32C {
		// Not expected (every part was checked): said, not hidden.
		err = fmt.Errorf("parallel upload of %s: the composed object has CRC32C %08x, the file %08x: %w", name, a.CRC32C, o.CRC32C, ErrChecksum)
	}
	return a, err
}

// composeTiers joins srcs, 32 at a time, into intermediate staging
// objects until one compose can take them all, and returns those. Each
// compose deletes its sources.
func (p *Parallel) composeTiers(ctx context.Context, srcs []string, staging string) ([]string, error) {
	for level := 1; len(srcs) > MaxComposeSources; level++ {
		next := make([]string, (len(srcs)+MaxComposeSources-1)/MaxComposeSources)
		err := p.inParallel(ctx, len(next), func(ctx context.Context, i int) error {
			group := srcs[i*MaxComposeSources : min(len(srcs), (i+1)*MaxComposeSources)]
			next[i] = fmt.Sprintf("%stier%d-%05d", staging, level, i+1)
			tries := 0
			return p.retry(ctx, func() error {
				tries++
				_, err := p.b.Compose(ctx, next[i], group, PutOptions{Unconditional: true, DeleteSources: true})
				if tries > 1 && errors.Is(err, ErrNotExist) {
					// An earlier try composed it unseen, and deleted the
					// sources: only that compose deletes them.
					if _, serr := p.b.Stat(ctx, next[i]); serr == nil {
						return nil
					}
				}
				return err
			})
		})
		if err != nil {
			return nil, err
		}
		srcs = next
	}
	return srcs, nil
}

// checkStaged makes sure the staged object holds size bytes, and the
// checksum of o if it has one, before it goes into place.
func (p *Parallel) checkStaged(ctx context.Context, obj string, size int64, o PutOptions) error {
	a, err := p.b.Stat(ctx, obj)
	if err != nil {
		return err
	}
	if a.Size != size {
		return fmt.Errorf("multipart upload %s: the store assembled %d bytes, %d were sent", obj, a.Size, size)
	}
	if o.SendCRC32C && reportsCRC(a) && a.CRC32C != o.CRC32C {
		return fmt.Errorf("multipart upload %s: the store assembled bytes with CRC32C %08x, the file's is %08x: %w", obj, a.CRC32C, o.CRC32C, ErrChecksum)
	}
	return nil
}

// reportsCRC reports whether the store gave a's checksum (an S3 store
// behind the XML API may give none; 0 is also the CRC32C of no bytes).
func reportsCRC(a ObjectAttrs) bool { return a.CRC32C != 0 || a.Size == 0 }

// sniffContentType returns the content type a single-request upload
// without one gets: the client sniffs the first 512 bytes
// (http.DetectContentType, through gax's DetermineContentType).
func sniffContentType(r io.ReaderAt, size int64) (string, error) {
	buf := make([]byte, min(size, 512))
	if n, err := r.ReadAt(buf, 0); n < len(buf) {
		return "", fmt.Errorf("reading the start of the file for its content type: %w", err)
	}
	return http.DetectContentType(buf), nil
}

// partSum returns the CRC32C of part pt of the size bytes of r: from
// o.Chunks where they cover it (no read), else read from r.
func partSum(ctx context.Context, r io.ReaderAt, size int64, pt part, o PutOptions) (uint32, error) {
	if sum, ok := o.Chunks.Range(pt.off, pt.n, size); ok {
		return sum, nil
	}
	return crc32cSection(ctx, r, pt.off, pt.n)
}

// crc32cSection returns the CRC-32C of n bytes of r at off.
func crc32cSection(ctx context.Context, r io.ReaderAt, off, n int64) (uint32, error) {
	buf := make([]byte, 1<<20)
	var sum uint32
	for done := int64(0); done < n; {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		m, err := r.ReadAt(buf[:min(int64(len(buf)), n-done)], off+done)
		sum = crc32c.Update(sum, buf[:m])
		done += int64(m)
		if err != nil && !(errors.Is(err, io.EOF) && done == n) {
			return 0, fmt.Errorf("reading part at %d: %w", off, err)
		}
	}
	return sum, nil
}

// Clean aborts the multipart uploads and deletes the objects under
// staging, and its folder in a bucket with a hierarchical namespace. It may be called any number of times, also for a prefix left by
// a crash; nil means nothing is left.
func (p *Parallel) Clean(ctx context.Context, staging string) error {
	if !validStaging(staging) {
		return fmt.Errorf("cleaning staging prefix %q: not one of NewStaging's", staging)
	}
	if p.o.Multipart != nil && !p.noXML.Load() {
		ups, err := p.o.Multipart.ListUploads(ctx, staging)
		switch {
		case errors.Is(err, ErrMultipartUnsupported):
			p.markNoXML(err)
		case errors.Is(err, ErrPermission):
			// Nothing to abort that bucketfs may see; retrying would not
			// change that.
			p.listOnce.Do(func() {
				p.o.Logger.Warn("the credentials may not list multipart uploads: uploads cut short by a crash cannot be aborted by bucketfs (a lifecycle rule AbortIncompleteMultipartUpload on the bucket does it)", "err", err)
			})
		case err != nil:
			return err
		}
		err = p.inParallel(ctx, len(ups), func(ctx context.Context, i int) error {
			err := p.o.Multipart.Abort(ctx, ups[i].Name, ups[i].UploadID)
			if errors.Is(err, ErrNotExist) {
				err = nil
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	var names []string
	q := ListQuery{Prefix: staging}
	for {
		page, err := p.b.List(ctx, q)
		if err != nil {
			return err
		}
		for _, o := range page.Objects {
			names = append(names, o.Name)
		}
		if page.NextPageToken == "" {
			break
		}
		q.PageToken = page.NextPageToken
	}
	err := p.inParallel(ctx, len(names), func(ctx context.Context, i int) error {
		err := p.b.Delete(ctx, names[i], 0)
		if errors.Is(err, ErrNotExist) {
			err = nil
		}
		return err
	})
	if err != nil {
		return err
	}
	// In a bucket with a hierarchical namespace the folder stays when its
	// last object goes. The shared StagingPrefix folder is left: another
	// upload may be staging under it.
	if err := p.b.DeleteEmptyFolders(ctx, staging); err != nil && !errors.Is(err, ErrNotSupported) {
		return err
	}
	return nil
}

// inParallel runs f(ctx, i) for i in [0, n), as many at once as the
// uploader has slots, and returns the first error. After an error it
// starts no more, cancels the running ones and waits for them.
func (p *Parallel) inParallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	for i := range n {
		// Acquire takes a slot or fails with nothing taken: a cancellation
		// never costs the uploader a slot.
		if err := p.slots.Acquire(gctx, 1); err != nil {
			break
		}
		g.Go(func() error {
			defer p.slots.Release(1)
			return f(gctx, i)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// retryAttempts is how often one step (a part, an initiate) is tried.
const retryAttempts = 5

// retry runs f until it succeeds, fails for good, or retryAttempts tries
// have failed, waiting RetryBase, 2*RetryBase, ... in between.
func (p *Parallel) retry(ctx context.Context, f func() error) error {
	return withBackoff(ctx, p.o.RetryBase, 0, retryable, f)
}

// withBackoff runs f until it succeeds, fails with an error again
// refuses, ctx ends, or retryAttempts tries have failed, waiting wait,
// 2*wait, ... (at most maxWait, if above 0) in between.
func withBackoff(ctx context.Context, wait, maxWait time.Duration, again func(error) bool, f func() error) error {
	for try := 1; ; try++ {
		err := f()
		if err == nil || try == retryAttempts || !again(err) || ctx.Err() != nil {
			return err
		}
		if !sleepCtx(ctx, wait) {
			return err
		}
		wait *= 2
		if maxWait > 0 {
			wait = min(wait, maxWait)
		}
	}
}

// retryable reports whether trying err's call again may help.
func retryable(err error) bool {
	for _, permanent := range []error{
		ErrPermission, ErrUnauthenticated, ErrBucketNotExist, ErrNotExist,
		ErrPrecondition, ErrMultipartUnsupported, context.Canceled, context.DeadlineExceeded,
		ErrOffline,  // the breaker's probe, not this loop, finds out when it is back
		ErrChecksum, // the bytes changed since they were summed: the caller sums them again
	} {
		if errors.Is(err, permanent) {
			return false
		}
	}
	return true
}
