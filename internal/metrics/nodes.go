package metrics

import "github.com/prometheus/client_golang/prometheus"

// WatchNodes reports the inodes the kernel holds of the mount, and how
// many it was asked to forget past the bound of --memory-limit, from
// nodes (fs.FS.KernelNodes).
func (m *Metrics) WatchNodes(nodes func() (held int, asked int64)) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bucketfs_kernel_inodes",
		Help: "Inodes of the mount the kernel holds (each costs a node in bucketfs's memory).",
	}, func() float64 {
		held, _ := nodes()
		return float64(held)
	}))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "bucketfs_kernel_inodes_released_total",
		Help: "Inodes the kernel was asked to forget because more than --memory-limit's share were held.",
	}, func() float64 {
		_, asked := nodes()
		return float64(asked)
	}))
}
