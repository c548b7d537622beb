package warm

import "github.com/bucketfs/bucketfs/transfer"

// Progress is how far a warm is.
type Progress struct {
	Files        int   `json:"files"` // objects done (fetched, found warm or failed)
	TotalFiles   int   `json:"total_files"`
	Bytes        int64 `json:"bytes"` // bytes of the objects done
	TotalBytes   int64 `json:"total_bytes"`
	AlreadyFiles int   `json:"already_files"` // objects whose copy was complete before
	AlreadyBytes int64 `json:"already_bytes"`
	Failed       int   `json:"failed"`
	FailedBytes  int64 `json:"failed_bytes"`
}

// WarmProgress is Progress by the name a Report embeds it under: the
// name package cache's callers know it by (cache.WarmProgress), so that
// they write r.WarmProgress.
type WarmProgress = Progress

// Error is one object a warm could not fill.
type Error struct {
	Object string `json:"object"`
	Err    string `json:"err"`
}

// Report is what a warm did. Its JSON is the control socket's.
type Report struct {
	WarmProgress
	Errors []Error `json:"errors,omitempty"` // at most maxErrors of the failures (Failed counts all), by name
}

// maxErrors bounds the failures a report names: a warm of many objects
// while the bucket is away fails them all, and the report must still
// fit in one reply of the control socket.
var maxErrors = 1000

// count adds object a, done, to r: found complete (already), failed
// (err), or fetched.
func (r *Report) count(a transfer.ObjectAttrs, already bool, err error) {
	r.Files++
	r.Bytes += a.Size
	switch {
	case err != nil:
		r.Failed++
		r.FailedBytes += a.Size
		if len(r.Errors) < maxErrors {
			r.Errors = append(r.Errors, Error{Object: a.Name, Err: err.Error()})
		}
	case already:
		r.AlreadyFiles++
		r.AlreadyBytes += a.Size
	}
}
