package clusterimport

import (
	"sync"
	"time"
)

// memory is everything the import controller remembers of each Cluster (namespace/name)
// between passes: when its last import failed, at which generation, and the registration key
// its import of a redeployAgentGeneration gives (the status write after an import conflicts with
// the key's annotation patch, and the import's retry must give the same key). The key goes once
// the import is recorded in the Cluster's status; a deleted Cluster's part goes too (forget).
type memory struct {
	mu     sync.Mutex
	failed map[string]failure
	keys   map[string]issued
}

type issued struct {
	generation int64
	key        string
}

type failure struct {
	at         time.Time
	generation int64
}

func newMemory() *memory {
	return &memory{failed: map[string]failure{}, keys: map[string]issued{}}
}

// failedLately: the Cluster's import failed at this generation less than retryFailed ago.
func (m *memory) failedLately(key string, generation int64, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.failed[key]
	return ok && f.generation == generation && now.Sub(f.at) < retryFailed
}

// importFailed: the Cluster's import at this generation failed now.
func (m *memory) importFailed(key string, generation int64, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failed[key] = failure{at: now, generation: generation}
}

// imported: the Cluster's import succeeded; its earlier failures go.
func (m *memory) imported(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.failed, key)
}

// recorded: the Cluster's status records its agent deployed at its redeployAgentGeneration: no
// retry of that import needs its key again.
func (m *memory) recorded(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.keys, key)
}

// keyFor is the registration key of the Cluster's import at generation (its
// redeployAgentGeneration): the one given before for it, else a new one from newKey.
func (m *memory) keyFor(key string, generation int64, newKey func() (string, error)) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.keys[key]; ok && v.generation == generation {
		return v.key, nil
	}
	k, err := newKey()
	if err != nil {
		return "", err
	}
	m.keys[key] = issued{generation: generation, key: k}
	return k, nil
}

// forget: the Cluster of key is deleted, or no longer imported.
func (m *memory) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.failed, key)
	delete(m.keys, key)
}

// size is how many Clusters memory holds something of.
func (m *memory) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.keys)
	for k := range m.failed {
		if _, ok := m.keys[k]; !ok {
			n++
		}
	}
	return n
}
