package deployer

import (
	"sync"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// passMemory is what the agent's BundleDeployment controller remembers between passes besides
// the caches, by "namespace/name": each pass's outcome, handed from the pass (reconcile) to the
// step after its status write (next), and the resourceVersion the last status write replaced.
// Seeing that version again means the cache has not caught up with the write yet: a pass from it
// would only end in a conflict.
type passMemory struct {
	outcomes sync.Map // key -> outcome
	replaced sync.Map // key -> resourceVersion
}

// stale says whether bd is the version the last status write replaced.
func (m *passMemory) stale(key string, bd *fleet.BundleDeployment) bool {
	rv, ok := m.replaced.Load(key)
	return ok && rv == bd.ResourceVersion
}

// record keeps the pass's outcome for the step after its status write.
func (m *passMemory) record(key string, o outcome) {
	m.outcomes.Store(key, o)
}

// written takes the pass's outcome once its status is written (bd is the object after the
// write; nil when it is gone), and remembers the version the write replaced. An update the
// apiserver found to change nothing keeps the version: nothing to wait out then.
func (m *passMemory) written(key string, bd *fleet.BundleDeployment) (outcome, bool) {
	v, ok := m.outcomes.LoadAndDelete(key)
	if !ok || bd == nil {
		return outcome{}, ok
	}
	o := v.(outcome)
	if !o.stale && bd.ResourceVersion != o.replaces {
		m.replaced.Store(key, o.replaces)
	}
	return o, true
}

// forget: the BundleDeployment of key is deleted.
func (m *passMemory) forget(key string) {
	m.replaced.Delete(key)
	m.outcomes.Delete(key)
}
