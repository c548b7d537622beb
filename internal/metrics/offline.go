package metrics

import "github.com/prometheus/client_golang/prometheus"

// WatchReachable reports online() as the gauge bucketfs_bucket_reachable
// (1: online; 0: offline, the client's circuit breaker is open). How long
// changes have waited is bucketfs_dirty_oldest_age_seconds.
func (m *Metrics) WatchReachable(online func() bool) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bucketfs_bucket_reachable",
		Help: "1 while the bucket answers; 0 while it is unreachable and the mount works offline (cached files served, changes queued).",
	}, func() float64 {
		if online() {
			return 1
		}
		return 0
	}))
}
