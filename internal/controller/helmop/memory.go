package helmop

import (
	"sync"
	"time"

	"github.com/fleetgo/fleet/internal/controller/retry"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// memory is everything the HelmOp controller remembers between passes, by namespace/name: the
// chart source each HelmOp's version was resolved from (after a restart every version is
// resolved once again) and the retries of its failed polls. A deleted HelmOp's part goes
// (forget); nothing else of it is kept.
type memory struct {
	mu       sync.Mutex
	resolved map[string]string
	retries  *retry.Retries
}

func newMemory() *memory {
	return &memory{resolved: map[string]string{}, retries: retry.New(retryFirst, retryMax)}
}

// sourceChanged: op's version was not resolved from its source (source) as it is now.
func (m *memory) sourceChanged(key string, op *fleet.HelmOp) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.resolved[key] != source(op)
}

// resolved: op's version was resolved from its source as it is now; earlier failures go.
func (m *memory) resolvedFrom(key string, op *fleet.HelmOp) {
	m.retries.Forget(key)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resolved[key] = source(op)
}

// pollFailed counts a failed poll and returns the wait before the next (at most ceiling).
func (m *memory) pollFailed(key string, now time.Time, ceiling time.Duration) time.Duration {
	return m.retries.Failed(key, now, ceiling)
}

// retryAt is when the poll that failed last is tried again; false when the last did not fail.
func (m *memory) retryAt(key string) (time.Time, bool) { return m.retries.Next(key) }

// forget: the HelmOp of key is deleted.
func (m *memory) forget(key string) {
	m.retries.Forget(key)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.resolved, key)
}

// size is how many HelmOps memory holds something of.
func (m *memory) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.resolved)
}
