package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// memory is what the cluster controller remembers between passes besides the caches: when each
// cluster's status was last written (written), how many BundleDeployment events each cluster has
// had since its first roll-up (events), its last roll-up that found nothing to write (rollups),
// and how many Clusters there are (clusters). The delays of roll-ups read it (delay), and so
// does the roll-up, to skip check-ins that change nothing it shows (unchanged). Keys are
// "namespace/name".
type memory struct {
	written sync.Map // key -> time.Time
	events  sync.Map // key -> *atomic.Uint64
	rollups sync.Map // key -> rollup
	// clusters counts the Clusters in the cache (nil: the delays ignore it).
	clusters *atomic.Int64
}

// forget: the Cluster of key is deleted.
func (m *memory) forget(key string) {
	m.written.Delete(key)
	m.events.Delete(key)
	m.rollups.Delete(key)
}

// changed counts an event of one of the cluster's BundleDeployments. Only clusters rolled up
// before are counted: a count begins with the first roll-up.
func (m *memory) changed(key string) {
	if n, ok := m.events.Load(key); ok {
		n.(*atomic.Uint64).Add(1)
	}
}

// eventCount is the cluster's count of BundleDeployment events, started at its first roll-up
// (no allocation on every check-in after).
func (m *memory) eventCount(key string) uint64 {
	n, ok := m.events.Load(key)
	if !ok {
		n, _ = m.events.LoadOrStore(key, new(atomic.Uint64))
	}
	return n.(*atomic.Uint64).Load()
}

// unchanged says whether status already is the roll-up was describes: nothing the roll-up reads
// changed since the last one that found the status as it should be (no BundleDeployment event,
// the same agent phase and interval), and the status still shows what that roll-up produced.
func (m *memory) unchanged(key string, was rollup, status fleet.ClusterStatus, ns string) bool {
	v, ok := m.rollups.Load(key)
	if !ok {
		return false
	}
	r := v.(rollup)
	return r.events == was.events && r.phase == was.phase && r.offline.Equal(was.offline) && r.interval == was.interval &&
		status.Namespace == ns && status.Display.State == r.state && status.Display.ReadyBundles == r.ready
}

// rolledUp records a roll-up made from was: one that writes (wrote) restarts the busy window of
// delay; one that found the status as it should be is remembered for unchanged.
func (m *memory) rolledUp(key string, was rollup, rolled fleet.ClusterStatus, wrote bool, now time.Time) {
	if wrote {
		m.rollups.Delete(key)
		m.written.Store(key, now)
		return
	}
	was.state, was.ready = rolled.Display.State, rolled.Display.ReadyBundles
	m.rollups.Store(key, was)
}

// delay is how long a roll-up that a BundleDeployment change asks for with base (specDelay or
// statusDelay) waits, given how many clusters there are and when the cluster's status was last
// written: statusDelay on a small installation; else base, stretched to busyDelay (a new
// deployment) or to busyReportDelay since the write (a report) while the cluster's status was
// written within busyDelay.
func (m *memory) delay(key string, base time.Duration, now time.Time) time.Duration {
	if m.clusters != nil && m.clusters.Load() <= smallInstallation {
		return statusDelay
	}
	at, ok := m.written.Load(key)
	if !ok {
		return base
	}
	since := now.Sub(at.(time.Time))
	if since >= busyDelay {
		return base
	}
	if base == specDelay {
		return busyDelay
	}
	return max(base, busyReportDelay-since)
}
