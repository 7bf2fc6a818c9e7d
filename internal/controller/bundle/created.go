package bundle

import (
	"sync"
	"time"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// createdTTL bounds how long a created BundleDeployment stands in for the cache's copy (it is
// dropped as soon as the cache shows it): long enough for a watch far behind to catch up, short
// enough that one deleted before the cache ever saw it is recreated in reasonable time.
const createdTTL = 5 * time.Minute

// slowCache is a lag between creating a deployment and the cache showing it worth a warning.
const slowCache = 5 * time.Second

// recentlyCreated holds BundleDeployments just created, until the cache shows them.
type recentlyCreated struct {
	mu sync.Mutex
	m  map[string]createdEntry
	// sweepAt is the size at which expired entries (of targets no longer planned) are dropped.
	sweepAt int
}

type createdEntry struct {
	bd *fleet.BundleDeployment
	at time.Time
}

func (r *recentlyCreated) add(bd *fleet.BundleDeployment, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[bd.Namespace+"/"+bd.Name] = createdEntry{bd: bd, at: now}
	if len(r.m) >= max(r.sweepAt, 1024) {
		for k, e := range r.m {
			if now.Sub(e.at) > createdTTL {
				delete(r.m, k)
			}
		}
		r.sweepAt = 2 * len(r.m)
	}
}

func (r *recentlyCreated) get(key string, now time.Time) *fleet.BundleDeployment {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[key]
	if !ok {
		return nil
	}
	if now.Sub(e.at) > createdTTL {
		delete(r.m, key)
		return nil
	}
	return e.bd
}

// take drops key and reports how long ago it was added.
func (r *recentlyCreated) take(key string, now time.Time) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[key]
	if !ok {
		return 0, false
	}
	delete(r.m, key)
	return now.Sub(e.at), true
}

// ofBundle returns the BundleDeployments kept for the Bundle of key ("namespace/name").
func (r *recentlyCreated) ofBundle(key string, now time.Time) []*fleet.BundleDeployment {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*fleet.BundleDeployment
	for _, e := range r.m {
		if now.Sub(e.at) <= createdTTL && e.bd.Labels[fleet.BundleNamespaceLabel]+"/"+e.bd.Labels[fleet.BundleLabel] == key {
			out = append(out, e.bd)
		}
	}
	return out
}

// finalizedTTL is how long a deleted Bundle is remembered: a BundleDeployment of it the cache
// shows only later (created just before the deletion, while the watch was behind) is deleted
// when it shows up within it.
const finalizedTTL = 10 * time.Minute

// recentlyFinalized holds the Bundles whose deletion was handled, by key, with when.
type recentlyFinalized struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func (r *recentlyFinalized) add(key string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, at := range r.m {
		if now.Sub(at) > finalizedTTL {
			delete(r.m, k)
		}
	}
	r.m[key] = now
}

func (r *recentlyFinalized) has(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.m[key]
	return ok && now.Sub(at) <= finalizedTTL
}
