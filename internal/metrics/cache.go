package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// cacheCollector reads one cache.Status per scrape and reports it as
// const metrics, so that a scrape locks the cache once, not once a series.
type cacheCollector struct {
	src StatusSource
	now func() time.Time

	hits, misses, uncached, readBytes, used, capacity, entries, evictions, downloading *prometheus.Desc
	dirtyFiles, dirtyBytes, oldestAge, queued, uploading, uploads, failures, conflicts *prometheus.Desc
	mismatches, held, refused                                                          *prometheus.Desc
	prefetch, fetched                                                                  *prometheus.Desc
}

func newCacheCollector(src StatusSource) *cacheCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &cacheCollector{
		src: src, now: time.Now,

		hits:        d("bucketfs_cache_hits_total", "Opens of a file served by a complete local copy."),
		misses:      d("bucketfs_cache_misses_total", "Opens of a file that needed a download."),
		uncached:    d("bucketfs_cache_uncached_opens_total", "Opens of a file too big for the cache, read straight from the bucket."),
		readBytes:   d("bucketfs_cache_read_bytes_total", "Bytes read from local cache files through the daemon (reads the kernel serves itself by FUSE passthrough are not seen)."),
		used:        d("bucketfs_cache_used_bytes", "Bytes of object data held in the cache, complete or not, changed files included."),
		capacity:    d("bucketfs_cache_capacity_bytes", "The cache's size cap (--cache-max-size)."),
		entries:     d("bucketfs_cache_entries", "Object versions in the cache."),
		evictions:   d("bucketfs_cache_evictions_total", "Cached copies evicted to make room."),
		downloading: d("bucketfs_cache_downloads_in_flight", "Object downloads running now."),

		dirtyFiles: d("bucketfs_dirty_files", "Files (and deletions) with changes not yet in the bucket."),
		dirtyBytes: d("bucketfs_dirty_bytes", "Bytes of files with changes not yet in the bucket."),
		oldestAge:  d("bucketfs_dirty_oldest_age_seconds", "How long the oldest change not yet in the bucket has waited; 0 when there is none."),
		queued:     d("bucketfs_upload_queue_length", "Names waiting in the upload queue (for the write-back delay, a retry or a free slot)."),
		uploading:  d("bucketfs_uploads_in_flight", "Uploads and deletions being sent to the bucket now."),
		uploads:    d("bucketfs_uploads_total", "File versions uploaded."),
		failures:   d("bucketfs_upload_failures_total", "Failed tries to send a change to the bucket; each is tried again later."),
		conflicts:  d("bucketfs_conflicts_total", "Local versions saved beside an object that changed in the bucket (NAME.bucketfs-conflict-...)."),

		mismatches: d("bucketfs_checksum_mismatches_total", "Cached copies or downloads that failed a checksum or size check (a clean copy is fetched again)."),
		prefetch: prometheus.NewDesc("bucketfs_prefetch_bytes_total",
			"Bytes of small files fetched ahead of their open: used (opened later) or wasted (evicted, or the mount ended, before any open).",
			[]string{"outcome"}, nil),
		fetched: prometheus.NewDesc("bucketfs_fetched_bytes_total",
			"Bytes of objects fetched into the cache, by reason: read (a reader waited for them), readahead (ahead of a reader reading in order), whole (the background fetch of a whole object, and the prefetch of small files), warm ('bucketfs warm').",
			[]string{"reason"}, nil),
		held:    d("bucketfs_held_files", "Changed files held, not uploaded, not removed, until 'bucketfs resolve': bytes they did not write failed their checksum check, or the bucket refused their upload as invalid."),
		refused: d("bucketfs_refused_files", "Changed files whose last upload the bucket refused in a way a person can fix (permission, credentials, a missing bucket); tried again every 5 minutes."),
	}
}

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.hits, c.misses, c.uncached, c.readBytes, c.used, c.capacity, c.entries, c.evictions, c.downloading,
		c.dirtyFiles, c.dirtyBytes, c.oldestAge, c.queued, c.uploading, c.uploads, c.failures, c.conflicts,
		c.mismatches, c.held, c.refused, c.prefetch, c.fetched,
	} {
		ch <- d
	}
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Status(0)
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter(c.hits, s.Hits)
	counter(c.misses, s.Misses)
	counter(c.uncached, s.Uncached)
	counter(c.readBytes, s.ReadBytes)
	gauge(c.used, float64(s.UsedBytes))
	gauge(c.capacity, float64(s.MaxBytes))
	gauge(c.entries, float64(s.Entries))
	counter(c.evictions, s.Evictions)
	ch <- prometheus.MustNewConstMetric(c.prefetch, prometheus.CounterValue, float64(s.PrefetchUsedBytes), "used")
	ch <- prometheus.MustNewConstMetric(c.prefetch, prometheus.CounterValue, float64(s.PrefetchWastedBytes), "wasted")
	for reason, v := range map[string]int64{"read": s.Fetched.Read, "readahead": s.Fetched.Readahead, "whole": s.Fetched.Whole, "warm": s.Fetched.Warm} {
		ch <- prometheus.MustNewConstMetric(c.fetched, prometheus.CounterValue, float64(v), reason)
	}
	gauge(c.downloading, float64(s.Downloading))

	gauge(c.dirtyFiles, float64(s.DirtyFiles))
	gauge(c.dirtyBytes, float64(s.DirtyBytes))
	age := 0.0
	if !s.OldestDirty.IsZero() {
		age = max(c.now().Sub(s.OldestDirty).Seconds(), 0)
	}
	gauge(c.oldestAge, age)
	gauge(c.queued, float64(s.Queued))
	gauge(c.uploading, float64(s.Uploading))
	counter(c.uploads, s.Uploads)
	counter(c.failures, s.UploadFailures)
	counter(c.conflicts, s.Conflicts)
	counter(c.mismatches, s.ChecksumMismatches)
	gauge(c.held, float64(s.DamagedFiles))
	gauge(c.refused, float64(len(s.Refused)))
}
