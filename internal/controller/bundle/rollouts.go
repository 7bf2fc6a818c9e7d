package bundle

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/rancher/wrangler/v3/pkg/apply"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// rolloutSet names the apply set of the Rollouts, one per Bundle that names a RolloutPolicy.
const rolloutSet = "fleet-rollout"

// rolloutWriter writes the Rollouts. The bundle pass decides a Bundle's rollout (progressive.go)
// and hands the Rollout's new status here; a handler of the Rollout controller of its own writes
// it: the Rollout, owned by its Bundle, through an apply set when there is none yet (or its
// labels changed), then its status. Until that status shows in the cache, the pass reads it
// from here, so no pass decides from an older one.
type rolloutWriter struct {
	apply    apply.Apply
	rollouts fleetcontrollers.RolloutController
	mu       sync.Mutex
	// wanted are the Rollouts to write, by namespace/name.
	wanted map[string]*wantedRollout
}

// wantedRollout is a Rollout as the last pass of its Bundle wants it.
type wantedRollout struct {
	bundle *fleet.Bundle // its owner: kind, name, namespace and UID only
	labels map[string]string
	status fleet.RolloutStatus
	// written is the resourceVersion the status write got: the status stays the passes' input
	// until the cache shows that version (a pass reading the older one in between would, for
	// one, start the rollout of the revision again).
	written string
}

func newRolloutWriter(ctx context.Context, a apply.Apply, rollouts fleetcontrollers.RolloutController) *rolloutWriter {
	w := &rolloutWriter{rollouts: rollouts, wanted: map[string]*wantedRollout{},
		apply: a.WithSetID(rolloutSet).WithCacheTypes(rollouts).WithSetOwnerReference(true, false)}
	rollouts.OnChange(ctx, "rollout-writer", w.sync)
	return w
}

// status is the Rollout status the last pass of b handed over and the cache does not show yet.
func (w *rolloutWriter) status(b *fleet.Bundle) (fleet.RolloutStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if want := w.wanted[b.Namespace+"/"+b.Name]; want != nil {
		return *want.status.DeepCopy(), true
	}
	return fleet.RolloutStatus{}, false
}

// publish hands over the Rollout of b as its pass wants it; roll is the Rollout as cached (nil:
// none yet). Nothing is written when that is it already.
func (w *rolloutWriter) publish(b *fleet.Bundle, roll *fleet.Rollout, st fleet.RolloutStatus) {
	labels := rolloutLabels(b)
	key := b.Namespace + "/" + b.Name
	w.mu.Lock()
	defer w.mu.Unlock()
	if roll != nil && equality.Semantic.DeepEqual(roll.Status, st) && labelsContain(roll.Labels, labels) {
		delete(w.wanted, key)
		return
	}
	owner := &fleet.Bundle{TypeMeta: metav1.TypeMeta{APIVersion: fleet.SchemeGroupVersion.String(), Kind: "Bundle"},
		ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: b.Namespace, UID: b.UID}}
	w.wanted[key] = &wantedRollout{bundle: owner, labels: labels, status: st}
	w.rollouts.Enqueue(b.Namespace, b.Name)
}

// forget: b is being deleted; its Rollout goes with it (owned by it), and nothing of it is written.
func (w *rolloutWriter) forget(b *fleet.Bundle) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.wanted, b.Namespace+"/"+b.Name)
}

// sync writes the Rollout of key as its Bundle's last pass wants it.
func (w *rolloutWriter) sync(key string, roll *fleet.Rollout) (*fleet.Rollout, error) {
	w.mu.Lock()
	want := w.wanted[key]
	written := ""
	if want != nil {
		written = want.written
	}
	w.mu.Unlock()
	if want == nil {
		return roll, nil
	}
	if written != "" && roll != nil {
		if roll.ResourceVersion == written {
			w.done(key, want) // the cache shows it now
		}
		return roll, nil
	}
	if roll == nil || !labelsContain(roll.Labels, want.labels) {
		w.mu.Lock()
		want.written = "" // (again): its status is written once the cache shows it
		w.mu.Unlock()
		return roll, w.create(want)
	}
	if !equality.Semantic.DeepEqual(roll.Status, want.status) {
		upd := roll.DeepCopy()
		upd.Status = want.status
		written, err := w.rollouts.UpdateStatus(upd)
		if err != nil {
			return roll, fmt.Errorf("updating rollout %s: %w", key, err)
		}
		w.mu.Lock()
		want.written = written.ResourceVersion
		w.mu.Unlock()
		return written, nil
	}
	w.done(key, want)
	return roll, nil
}

// done drops want, unless a later pass replaced it.
func (w *rolloutWriter) done(key string, want *wantedRollout) {
	w.mu.Lock()
	if w.wanted[key] == want {
		delete(w.wanted, key)
	}
	w.mu.Unlock()
}

// create writes the Rollout, owned by its Bundle, through the apply set (its status follows
// once the cache shows it).
func (w *rolloutWriter) create(want *wantedRollout) error {
	r := &fleet.Rollout{TypeMeta: metav1.TypeMeta{APIVersion: fleet.SchemeGroupVersion.String(), Kind: "Rollout"},
		ObjectMeta: metav1.ObjectMeta{Name: want.bundle.Name, Namespace: want.bundle.Namespace, Labels: maps.Clone(want.labels)}}
	if err := w.apply.WithOwner(want.bundle).ApplyObjects(r); err != nil {
		return fmt.Errorf("writing rollout %s/%s: %w", r.Namespace, r.Name, err)
	}
	return nil
}
