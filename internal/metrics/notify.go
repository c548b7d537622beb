package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Notify counts the bucket's change notifications (internal/notify).
type Notify struct {
	events *prometheus.CounterVec
	lag    prometheus.Histogram
	live   atomic.Int64 // 1 live, 0 down, -1 off
}

// Notify registers the notification series and returns their recorder:
// bucketfs_notify_events_total{outcome}, bucketfs_notify_lag_seconds
// (from the event's time to applied) and bucketfs_notify_live (1 live, 0
// down, -1 off).
func (m *Metrics) Notify() *Notify {
	n := &Notify{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bucketfs_notify_events_total",
			Help: "Change notifications of the bucket received, by outcome: applied, stale (older than what is known), duplicate (known already, or this mount's own). Messages that are not GCS object notifications are logged and dropped, not counted.",
		}, []string{"outcome"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "bucketfs_notify_lag_seconds",
			Help:    "Time from a change in the bucket (the event's eventTime) to its notification applied here.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14), // 10 ms .. 82 s
		}),
	}
	n.live.Store(-1)
	for _, o := range []string{"applied", "stale", "duplicate"} {
		n.events.WithLabelValues(o)
	}
	m.reg.MustRegister(n.events, n.lag, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bucketfs_notify_live",
		Help: "1 while the bucket's change notifications are received (what is known is current), 0 while they are down (the metadata TTL holds), -1 when not configured.",
	}, func() float64 { return float64(n.live.Load()) }))
	return n
}

// Event counts one notification with its outcome and, if applied, its lag.
func (n *Notify) Event(outcome string, lag time.Duration) {
	n.events.WithLabelValues(outcome).Inc()
	if outcome == "applied" && lag >= 0 {
		n.lag.Observe(lag.Seconds())
	}
}

// SetLive records the subscription's state.
func (n *Notify) SetLive(live bool) {
	if live {
		n.live.Store(1)
	} else {
		n.live.Store(0)
	}
}
