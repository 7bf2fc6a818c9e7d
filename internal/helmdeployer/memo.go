package helmdeployer

import (
	"sync"
	"time"
)

// ReleaseMemoTTL is how long Current trusts the revision it last read or wrote.
const ReleaseMemoTTL = 30 * time.Second

// releaseMemo remembers the newest revision of each release, by namespace/name, as Current
// read it or Deploy wrote it. Checks triggered by watch events come several times a second
// during a rollout, and each would otherwise list and decode the release's Secrets. Only this
// agent changes its releases, and its Deploy, Rollback and Uninstall keep the memo right; the
// TTL bounds how long a change made by hand (a helm rollback) goes unseen.
type releaseMemo struct {
	mu      sync.Mutex
	entries map[string]memoEntry
}

type memoEntry struct {
	rel *Release // nil: no release
	at  time.Time
}

func (m *releaseMemo) get(key string, now time.Time) (*Release, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok || now.Sub(e.at) > ReleaseMemoTTL {
		return nil, false
	}
	return e.rel, true
}

func (m *releaseMemo) put(key string, rel *Release, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[string]memoEntry{}
	}
	m.entries[key] = memoEntry{rel: rel, at: now}
}

func (m *releaseMemo) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, key)
}
