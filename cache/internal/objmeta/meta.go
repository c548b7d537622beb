package objmeta

import (
	"crypto/rand"
	"encoding/hex"
	"maps"
	"slices"
	"time"

	"github.com/bucketfs/bucketfs/transfer"
)

// MtimeKey is the custom metadata key (x-goog-meta-gcsfuse_mtime) of a
// file's modification time, in RFC 3339 with nanoseconds. gcsfuse reads
// the same key.
const MtimeKey = "gcsfuse_mtime"

// AttemptKey is the custom metadata key (x-goog-meta-bucketfs-upload)
// that carries the ID of the upload that wrote an object version.
const AttemptKey = "bucketfs-upload"

// FormatMtime is t as a MtimeKey value.
func FormatMtime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ParseMtime reads a MtimeKey value.
func ParseMtime(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false // most objects: no error made (and dropped) per getattr
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// Mtime is the modification time of object version a: MtimeKey if it
// has it, else when it was written.
func Mtime(a transfer.ObjectAttrs) time.Time {
	if t, ok := ParseMtime(a.Metadata[MtimeKey]); ok {
		return t
	}
	return a.Updated
}

// Own is the custom metadata of a bucket version that a new local
// version keeps: all of it but the upload ID.
func Own(md map[string]string) map[string]string {
	if len(md) == 0 {
		return nil
	}
	out := maps.Clone(md)
	delete(out, AttemptKey)
	return out
}

// Set is the custom metadata of a local version after the keys of md
// are set on it: of local, its metadata, or if it has none and no local
// changes (!changed), of Own(bucket), the metadata of the bucket's
// version it is a copy of; with md's keys set, none removed (a patch
// keeps the keys it does not name). It is a new map: the old one may be
// shared with a snapshot of the record, and is never changed in place.
func Set(local map[string]string, changed bool, bucket, md map[string]string) map[string]string {
	base := local
	if base == nil && !changed {
		base = Own(bucket)
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, md)
	return out
}

// ForUpload is the custom metadata of an upload: meta (the local
// version's), the file's modification time (unless zero), and the
// upload's ID.
func ForUpload(meta map[string]string, mtime time.Time, attempt string) map[string]string {
	out := maps.Clone(meta)
	if out == nil {
		out = map[string]string{}
	}
	if !mtime.IsZero() {
		out[MtimeKey] = FormatMtime(mtime)
	}
	out[AttemptKey] = attempt
	return out
}

// SameMeta reports whether live, a version in the bucket, carries the
// custom metadata an upload of meta with mtime would carry, its upload
// ID aside.
func SameMeta(live map[string]string, meta map[string]string, mtime time.Time) bool {
	return maps.Equal(Own(live), Own(ForUpload(meta, mtime, "")))
}

// NewAttemptID returns a new upload ID (AttemptKey): 16 hex digits.
func NewAttemptID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// WrittenBy reports whether an object version with custom metadata md
// was written by one of the uploads attempts names.
func WrittenBy(md map[string]string, attempts []string) bool {
	id := md[AttemptKey]
	return id != "" && slices.Contains(attempts, id)
}

// OfFile is local version a (its record's name, generation, metadata) as
// its data file shows it: the file's size and modification time, and
// MtimeKey, if a carries it, set to that time in a new map (the file's
// time is newer than the object's).
func OfFile(a transfer.ObjectAttrs, size int64, mtime time.Time) transfer.ObjectAttrs {
	a.Size, a.Updated = size, mtime
	if _, ok := a.Metadata[MtimeKey]; ok {
		a.Metadata = maps.Clone(a.Metadata)
		a.Metadata[MtimeKey] = FormatMtime(mtime)
	}
	return a
}
