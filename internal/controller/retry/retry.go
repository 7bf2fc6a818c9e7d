// Package retry spaces the tries of a controller's keys that keep failing (a chart source that
// cannot be reached, a registry that refuses a scan) with the work queue's per-item exponential
// rate limiter, and remembers when each key may be tried next: a change in between (the status
// written after the failure is one) does not bring its next try forward.
package retry

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Retries are the pending retries of a controller's keys (namespace/name).
type Retries struct {
	limiter workqueue.TypedRateLimiter[string]
	mu      sync.Mutex
	at      map[string]time.Time
}

// New makes Retries whose first wait is first, each further failure in a row doubling it up to
// most.
func New(first, most time.Duration) *Retries {
	return &Retries{limiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](first, most), at: map[string]time.Time{}}
}

// Failed counts a failure of key at now and returns the wait before its next try: the
// limiter's, and never more than ceiling when ceiling is positive (a polling interval shorter
// than the backoff).
func (r *Retries) Failed(key string, now time.Time, ceiling time.Duration) time.Duration {
	wait := r.limiter.When(key)
	if ceiling > 0 {
		wait = min(wait, ceiling)
	}
	r.mu.Lock()
	r.at[key] = now.Add(wait)
	r.mu.Unlock()
	return wait
}

// Next is when key, whose last try failed, is tried again; false when its last try did not fail.
func (r *Retries) Next(key string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.at[key]
	return at, ok
}

// Forget clears key's failures: it succeeded, or it is gone.
func (r *Retries) Forget(key string) {
	r.limiter.Forget(key)
	r.mu.Lock()
	delete(r.at, key)
	r.mu.Unlock()
}
