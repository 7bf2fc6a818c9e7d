package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The progressive rollout families, labelled with the Bundle's name and namespace.
var (
	rolloutHalts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_rollout_halts_total",
		Help: "The number of rollouts halted because a stage failed more clusters than its failure budget."}, gitRepoKey)
	rolloutRollbacks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_rollout_rolled_back_clusters_total",
		Help: "The number of clusters a halted or aborted rollout returned to the previous revision."}, gitRepoKey)

	rolloutCollectors = []prometheus.Collector{rolloutHalts, rolloutRollbacks}
	rolloutNames      = []string{"fleet_rollout_halts_total", "fleet_rollout_rolled_back_clusters_total"}
)

// RolloutHalted counts a halted rollout of a Bundle.
func RolloutHalted(namespace, name string) {
	rolloutHalts.WithLabelValues(name, namespace).Inc()
}

// RolledBack counts clusters a Bundle's rollout returned to the previous revision.
func RolledBack(namespace, name string, n int) {
	rolloutRollbacks.WithLabelValues(name, namespace).Add(float64(n))
}
