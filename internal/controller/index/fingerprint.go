package index

import "sync"

// Fingerprints remembers, per object key, what a handler last read of an object, so that the
// frequent updates it does not read (status heartbeats) enqueue nothing.
type Fingerprints struct {
	mu sync.Mutex
	m  map[string]string
}

// Changed records fp under key and reports whether it differs from the one recorded before.
func (f *Fingerprints) Changed(key, fp string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]string{}
	}
	if old, ok := f.m[key]; ok && old == fp {
		return false
	}
	f.m[key] = fp
	return true
}

// Forget drops what was recorded under key (its object was deleted).
func (f *Fingerprints) Forget(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, key)
}
