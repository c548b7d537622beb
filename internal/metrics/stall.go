package metrics

import (
	"github.com/bucketfs/bucketfs/transfer"
	"github.com/prometheus/client_golang/prometheus"
)

// stallDirs are the dir labels of bucketfs_stalled_transfers_total,
// created at zero.
var stallDirs = []string{"read", "upload"}

func newStallCounter() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketfs_stalled_transfers_total",
		Help: "Requests cancelled because their body made no progress for --stall-timeout, by direction: a read is taken up by a new request, an upload is sent again later.",
	}, []string{"dir"})
	for _, d := range stallDirs {
		c.WithLabelValues(d)
	}
	return c
}

var _ transfer.StallObserver = bucketObserver{}

// Stalled implements transfer.StallObserver.
func (o bucketObserver) Stalled(dir string) {
	o.m.stalled.WithLabelValues(dir).Inc()
}
