package notify

import (
	"maps"
	"sync"
	"time"

	"github.com/fleetgo/fleet/internal/notify"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// folds hold, per Alert and source, what its digest window keeps back: when each reason was
// last delivered, and the changes held since. It is the manager's memory, seeded from the
// Alert's status (the last reason sent per source, and when): after a restart, a repeat of
// another reason than that goes out as it comes.
type folds struct {
	mu sync.Mutex
	by map[job]*fold
}

type fold struct {
	sentAt map[string]time.Time // by reason: when last delivered
	// changes are the held changes by reason, last the key of the state last counted, until
	// when the window of the first held one ends.
	changes map[string]int
	last    string
	until   time.Time
	// sent is the key delivered last.
	sent string
}

func newFolds() *folds { return &folds{by: map[job]*fold{}} }

// hold is what of source's unsent events evs goes out now, cur being its current event, and
// when to look again (0: no need): a change whose reason was delivered for the source less
// than the window ago is held, and every change after it, until that window ends; then the
// state they came to goes out as their digest.
func (f *folds) hold(a *fleet.Alert, source string, cur notify.Event, evs []notify.Event, now time.Time) ([]notify.Event, time.Duration) {
	w := digestWindow(a)
	if !cur.Folds || w <= 0 {
		return evs, 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.of(a, source)
	if len(st.changes) > 0 && cur.Key != st.last {
		st.changes[cur.Reason]++
		st.last = cur.Key
	}
	if len(st.changes) == 0 {
		t, ok := st.sentAt[cur.Reason]
		// The state just delivered, as an Alert cache from before its record shows it, is no
		// change (the deliveries drop it).
		if len(evs) == 0 || !ok || !now.Before(t.Add(w)) || notify.BaseKey(cur.Key) == notify.BaseKey(st.sent) {
			return evs, 0
		}
		st.changes[cur.Reason], st.last, st.until = 1, cur.Key, t.Add(w)
	}
	if now.Before(st.until) {
		return nil, st.until.Sub(now)
	}
	if n := total(st.changes); n == 1 {
		return evs, 0 // one change: its own message
	}
	return []notify.Event{notify.Digest(cur, st.changes, st.until)}, 0
}

// of is the fold of a's source, seeded from a's status when new.
func (f *folds) of(a *fleet.Alert, source string) *fold {
	j := job{alert: a.Namespace + "/" + a.Name, source: source}
	st := f.by[j]
	if st == nil {
		st = &fold{sentAt: map[string]time.Time{}, changes: map[string]int{}}
		for _, s := range a.Status.Sent {
			if s.Source == source && s.Reason != "" && s.At != nil {
				st.sentAt[s.Reason] = s.At.Time
			}
		}
		f.by[j] = st
	}
	return st
}

// delivered notes e delivered for j: its reason, and those of the changes it digested, were
// sent now.
func (f *folds) delivered(j job, e notify.Event, now time.Time) {
	if !e.Folds {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.by[j]
	if st == nil {
		return
	}
	st.sentAt[e.Reason], st.sent = now, e.Key
	if e.Key != notify.BaseKey(e.Key) || total(st.changes) <= 1 {
		for r := range st.changes {
			st.sentAt[r] = now
		}
		st.changes = map[string]int{}
	}
}

// forget drops the folds of the deleted Alert of key.
func (f *folds) forget(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	dropAlert(f.by, key)
}

// dropAlert drops from m the jobs of the Alert of key.
func dropAlert[V any](m map[job]V, key string) {
	maps.DeleteFunc(m, func(j job, _ V) bool { return j.alert == key })
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// notReadyAfter is how long a's sources may stay not ready before a NotReady.
func notReadyAfter(a *fleet.Alert) time.Duration {
	if a.Spec.NotReadyAfter != nil {
		return a.Spec.NotReadyAfter.Duration
	}
	return fleet.DefaultNotReadyAfter
}

// digestWindow is how long a's repeats are held.
func digestWindow(a *fleet.Alert) time.Duration {
	if a.Spec.DigestWindow != nil {
		return a.Spec.DigestWindow.Duration
	}
	return fleet.DefaultDigestWindow
}
