package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// standbyFilledName is 1 once the replica's caches are filled before it leads (a standby ready to
// take over with only its controllers' pass left), 0 before.
const standbyFilledName = "fleet_controller_standby_caches_filled"

var (
	standbyFilled = prometheus.NewGauge(prometheus.GaugeOpts{Name: standbyFilledName,
		Help: "1 once this replica's caches were filled while it waited for the leader Lease, 0 before."})
	standbyOnce sync.Once
)

// StandbyFilled records that the caches were filled while standing by (filled) or are being
// filled (not). The family exists from the first call on.
func StandbyFilled(filled bool) {
	standbyOnce.Do(func() { prometheus.MustRegister(standbyFilled) })
	v := 0.0
	if filled {
		v = 1
	}
	standbyFilled.Set(v)
}
