package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// ObjectAttrs is what bucketfs needs to know about one object version.
type ObjectAttrs struct {
	Name           string
	Size           int64
	Generation     int64 // identifies the content; changes on every overwrite
	Metageneration int64 // changes on every metadata update of one generation
	Updated        time.Time
	ContentType    string
	// ContentEncoding is how the stored bytes are encoded ("gzip": GCS
	// decompresses them when serving, unless asked for StoredBytes).
	ContentEncoding string
	Metadata        map[string]string // custom metadata (x-goog-meta-*)
	// Checksums of the content, as the store reports them: the same bytes
	// have the same ones under any name and generation. MD5 is nil where
	// the store has none (composite objects).
	CRC32C uint32
	MD5    []byte
}

// OrName returns *a, or, if a is nil, the attributes of generation gen
// of name that are known without the object's resource.
func (a *ObjectAttrs) OrName(name string, gen int64) ObjectAttrs {
	if a != nil {
		return *a
	}
	return ObjectAttrs{Name: name, Generation: gen}
}

// SameContent reports whether a and b have the same bytes, by size and
// checksums (both must have a CRC32C; MD5 counts where both have one). A
// server-side rename gives an object a new generation: this is how a
// cached copy of the old one is known to still be the content.
func SameContent(a, b ObjectAttrs) bool {
	if a.Size != b.Size || a.CRC32C != b.CRC32C || (a.CRC32C == 0 && a.Size > 0) {
		return false
	}
	if a.MD5 != nil && b.MD5 != nil {
		return string(a.MD5) == string(b.MD5)
	}
	return true
}

// ListQuery selects one page of a listing.
type ListQuery struct {
	Prefix    string // only names that start with Prefix
	Delimiter string // "/" for one directory level; "" for a flat listing
	PageToken string // "" for the first page; ListPage.NextPageToken after that
	PageSize  int    // 0 lets the implementation choose
	// StartOffset and EndOffset, if set, keep to the objects whose names
	// are at or after StartOffset and before EndOffset (GCS: startOffset,
	// endOffset). With a Delimiter, a prefix is listed if one of its
	// objects is in that range, so a prefix may come before StartOffset
	// (as "d/" does for a StartOffset of "d/m"). Every implementation
	// honours them; ListAll checks the answers and lists one page after
	// another if a bucket does not.
	StartOffset, EndOffset string
	// Placeholders also returns, in Objects, the objects named like a
	// prefix of the page ("dir/" under Prefix, with a Delimiter "/"),
	// besides the prefix itself: a directory's placeholder, with its
	// metadata. GCS: includeTrailingDelimiter.
	Placeholders bool
}

// ListPage is one page of a listing. With a delimiter, names that contain it
// after the prefix are rolled up into Prefixes (each ending in the delimiter);
// Objects then holds only the names directly at this level, which may include
// the prefix itself (a "dir/" placeholder object).
type ListPage struct {
	Objects       []ObjectAttrs
	Prefixes      []string
	NextPageToken string // "" on the last page
}

// PutOptions are the conditions of a single-request upload.
type PutOptions struct {
	// IfGenerationMatch makes the upload succeed only if the live object has
	// this generation; 0 means "only if the object does not exist". A
	// mismatch fails with ErrPrecondition and changes nothing.
	IfGenerationMatch int64
	// Unconditional ignores IfGenerationMatch.
	Unconditional bool
	ContentType   string
	// ContentEncoding is kept as the new version's (gzip: the body is
	// the stored bytes of a gzip-encoded object, as read with StoredBytes).
	ContentEncoding string
	Metadata        map[string]string
	// CRC32C, with SendCRC32C, is the checksum of the whole body: the
	// store refuses an upload whose bytes do not have it (ErrChecksum,
	// or a transient error), so a body damaged on its way, or changed
	// while it was read, never becomes the object.
	CRC32C     uint32
	SendCRC32C bool
	// Chunks, where the caller knows them, are the body's CRC32C chunk
	// by chunk, from the read that gave CRC32C: a parallel upload takes
	// its parts' checksums from them. Single-request uploads ignore it.
	Chunks ChunkSums
	// DeleteSources (Compose only) has the store delete the sources in
	// the same call, once the compose succeeded (GCS:
	// deleteSourceObjects). Sources deleted so are kept neither by soft
	// delete nor by versioning, and pay no early-deletion fee; deleted
	// by a later Delete, each would be kept, and billed, for the soft
	// delete's retention.
	DeleteSources bool
	// Resumable (Put only) sends the object as one resumable upload
	// session (GCS), in chunks each retried on its own, instead of one
	// request.
	Resumable bool
}

// Bucket is one bucket of an object store, as bucketfs uses it.
//
// Contract, for every implementation:
//   - Methods are safe for concurrent use by many goroutines.
//   - ctx is honoured: a cancelled call returns promptly with ctx.Err() (or an
//     error wrapping it) and leaves nothing running.
//   - Errors are classified with the sentinels of this package, testable with
//     errors.Is: ErrNotExist, ErrBucketNotExist, ErrPermission,
//     ErrUnauthenticated, ErrPrecondition, ErrInvalid. Anything else is transient or
//     unknown; its text says what happened.
//   - Idempotent calls (Stat, List, ReadRange, Delete with a generation) are
//     retried with backoff by the implementation; callers do not retry them.
type Bucket interface {
	// Name returns the bucket's name.
	Name() string

	// Stat returns the attributes of the live version of object name, or
	// ErrNotExist.
	Stat(ctx context.Context, name string) (ObjectAttrs, error)

	// List returns one page of the names under q.Prefix.
	List(ctx context.Context, q ListQuery) (ListPage, error)

	// ReadRange copies length bytes starting at off of generation gen of the
	// object into w, and returns how many bytes it copied. With a ctx made
	// by StoredBytes, an object stored with a Content-Encoding is read as
	// stored (the bytes its size and checksums count), not decoded. A short count
	// with a nil error means the object ended first. If that generation is
	// no longer the live one (or is gone), the error wraps ErrNotExist. The
	// caller owns w; ReadRange writes to it from the calling goroutine only.
	ReadRange(ctx context.Context, name string, gen, off, length int64, w io.Writer) (int64, error)

	// Put uploads the object in one request under the conditions of o and
	// returns the attributes of the new version.
	Put(ctx context.Context, name string, r io.Reader, o PutOptions) (ObjectAttrs, error)

	// Compose writes the concatenation of srcs (1 to MaxComposeSources
	// objects of this bucket, in order) as the object dst, under the
	// conditions of o, and returns the attributes of the new version. The
	// bytes never leave the store. A missing source is ErrNotExist.
	Compose(ctx context.Context, dst string, srcs []string, o PutOptions) (ObjectAttrs, error)

	// Copy writes generation srcGen of object src (0: the live one) as the
	// object dst, server-side (the bytes never leave the store), under
	// the conditions of o on dst, and returns the attributes of the new
	// version. o.Metadata, if not nil, replaces the source's custom
	// metadata. A source version that is gone is ErrNotExist.
	Copy(ctx context.Context, src string, srcGen int64, dst string, o PutOptions) (ObjectAttrs, error)

	// SetMetadata sets the custom metadata keys of md on the live version
	// of the object, only if its generation is gen (ErrPrecondition
	// otherwise; ErrNotExist if there is none), and returns its new
	// attributes. Keys not in md are kept. The content is not touched.
	SetMetadata(ctx context.Context, name string, gen int64, md map[string]string) (ObjectAttrs, error)

	// Delete removes the object. With gen > 0 it removes only if the live
	// generation is gen (ErrPrecondition otherwise). A missing object is
	// ErrNotExist.
	Delete(ctx context.Context, name string, gen int64) error

	// RenameFolder renames folder from to to (both end in '/'), with every
	// object under it, in one atomic step of the store, and returns once it
	// is done. Only buckets with a hierarchical namespace can; the objects
	// get new generations. An error that matches ErrNotRenamed means the
	// store did not and will not rename anything (ErrNotSupported: the
	// bucket cannot; the store refused, for example because to exists or
	// from does not); any other error leaves it unknown whether the folder
	// was renamed, now or later. It is not retried.
	RenameFolder(ctx context.Context, from, to string) error

	// DeleteEmptyFolders deletes folder prefix (ending in '/') and the
	// folders under it, deepest first, in a bucket with a hierarchical
	// namespace, where a folder stays when its last object goes. Only
	// empty folders go: one that holds an object (or a folder that does)
	// stays, and so do the folders above it; a folder that is not there
	// is no error. Objects are never deleted. In a flat bucket it returns
	// ErrNotSupported and sends nothing.
	DeleteEmptyFolders(ctx context.Context, prefix string) error

	// CheckAccess verifies, with one cheap call, that the bucket exists and
	// that the credentials may list it. It returns ErrBucketNotExist,
	// ErrPermission, ErrUnauthenticated or another error.
	CheckAccess(ctx context.Context) error
}

// StoredBytes returns a ctx under which ReadRange reads an object stored
// with a Content-Encoding (gzip) as it is stored, as its size and
// checksums count it, instead of decoded (GCS's decompressive
// transcoding): a file shows exactly the stored bytes, at the size shown.
func StoredBytes(ctx context.Context) context.Context {
	return context.WithValue(ctx, storedBytesKey{}, true)
}

type storedBytesKey struct{}

func wantsStoredBytes(ctx context.Context) bool { v, _ := ctx.Value(storedBytesKey{}).(bool); return v }

// MaxComposeSources is how many sources one Compose call takes (a GCS limit).
const MaxComposeSources = 32

// Sentinel errors; implementations wrap them so errors.Is works and the
// message keeps the detail.
var (
	ErrNotExist        = errors.New("object does not exist")
	ErrBucketNotExist  = errors.New("bucket does not exist")
	ErrPermission      = errors.New("permission denied by the bucket")
	ErrUnauthenticated = errors.New("credentials missing or not accepted")
	ErrPrecondition    = errors.New("precondition failed: the object changed")
	// ErrInvalid: the store refused the request itself (HTTP 400), for
	// example an object name it does not take (GCS: over 1024 bytes of
	// UTF-8). GCS answers a body whose checksum is not the one sent
	// with 400 too, so one such answer to an upload does not prove that
	// a retry would fail: the caller decides (cache/refusal.go).
	ErrInvalid    = errors.New("the bucket refused the request as invalid")
	ErrNotRenamed = errors.New("folder not renamed")
	// ErrChecksum: bytes read or sent do not have the checksum the store
	// (or the cache's record) says they must have.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrShortRead: a read returned another number of bytes than the
	// object's size says it must.
	ErrShortRead = errors.New("object size does not match the bytes read")
	// ErrNotSupported also matches ErrNotRenamed.
	ErrNotSupported = fmt.Errorf("%w: the bucket has no hierarchical namespace", ErrNotRenamed)
)

// OpError records which call on which object failed.
type OpError struct {
	Op     string // "stat", "list", "read", "put", "compose", "delete", "check", ...
	Bucket string
	Object string
	Err    error
}

func (e *OpError) Error() string {
	if e.Object == "" {
		return fmt.Sprintf("%s gs://%s: %v", e.Op, e.Bucket, e.Err)
	}
	return fmt.Sprintf("%s gs://%s/%s: %v", e.Op, e.Bucket, e.Object, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }
