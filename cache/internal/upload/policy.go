package upload

import "time"

// When a failed upload is tried again. The caller schedules the tries
// (its queue); these are the waits it schedules them after.
const (
	retryMax       = time.Minute     // longest wait between two tries of a failing upload
	PermanentRetry = 5 * time.Minute // wait after the bucket refused an upload in a way a person can fix
	OfflineRetry   = time.Second     // an upload cut by an outage: due again when the bucket is back (the uploader waits for it)
)

// Backoff is the wait before the next try of an upload that failed
// retries times in a row (at least once): a second, doubled at each
// failure, at most retryMax.
func Backoff(retries int) time.Duration {
	return min(time.Second<<min(retries-1, 6), retryMax)
}
