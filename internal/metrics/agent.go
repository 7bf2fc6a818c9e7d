package metrics

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The agent's own families (Fleet's agent exports none): how long deploys take, drift found and
// corrected per BundleDeployment, and how long ago the agent last checked in.
var (
	deployDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fleet_agent_deploy_duration_seconds",
		Help:    "How long a Helm install or upgrade of a BundleDeployment took (action: install, upgrade), failed ones included.",
		Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}}, []string{"action"})
	driftDetected = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_agent_drift_detected_total",
		Help: "The number of times a BundleDeployment's resources were found modified after being as deployed."}, []string{"bundledeployment"})
	driftCorrected = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_agent_drift_corrected_total",
		Help: "The number of drift corrections (rollbacks to the deployed revision) that succeeded."}, []string{"bundledeployment"})

	checkinAgeName    = "fleet_agent_checkin_age_seconds"
	agentNames        = []string{"fleet_agent_deploy_duration_seconds", "fleet_agent_drift_detected_total", "fleet_agent_drift_corrected_total"}
	lastCheckIn       atomic.Int64 // unix nanoseconds of the last successful check-in; 0: none yet
	agentStart        = time.Now()
	registerAgentOnce sync.Once
)

// RegisterAgent puts the agent's families on the default registry; later calls do nothing.
func RegisterAgent() {
	registerAgentOnce.Do(func() {
		age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: checkinAgeName,
			Help: "Seconds since the agent last checked in with the manager (since it started, before the first check-in)."},
			func() float64 {
				since := agentStart
				if n := lastCheckIn.Load(); n != 0 {
					since = time.Unix(0, n)
				}
				return time.Since(since).Seconds()
			})
		prometheus.MustRegister(deployDuration, driftDetected, driftCorrected, age)
	})
}

// Deployed records a Helm install or upgrade and how long it took.
func Deployed(install bool, took time.Duration) {
	action := "upgrade"
	if install {
		action = "install"
	}
	deployDuration.WithLabelValues(action).Observe(took.Seconds())
}

// DriftDetected counts a BundleDeployment found modified.
func DriftDetected(bd string) { driftDetected.WithLabelValues(bd).Inc() }

// DriftCorrected counts a successful drift correction.
func DriftCorrected(bd string) { driftCorrected.WithLabelValues(bd).Inc() }

// ForgetBundleDeployment removes a deleted BundleDeployment's series.
func ForgetBundleDeployment(bd string) {
	driftDetected.DeleteLabelValues(bd)
	driftCorrected.DeleteLabelValues(bd)
}

// CheckedIn records a successful check-in.
func CheckedIn(at time.Time) { lastCheckIn.Store(at.UnixNano()) }
