package bundle

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/rancher/wrangler/v3/pkg/apply"
	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/bundlevalues"
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
	// secrets and secretWriter serve each Rollout's revision-values Secret: the Helm values of
	// its current and passed revisions are kept there, not in its status, which whoever reads
	// rollouts in the namespace reads.
	secrets      corecontrollers.SecretCache
	secretWriter corecontrollers.SecretClient
	mu           sync.Mutex
	// wanted are the Rollouts to write, by namespace/name.
	wanted map[string]*wantedRollout
}

// wantedRollout is a Rollout as the last pass of its Bundle wants it.
type wantedRollout struct {
	bundle *fleet.Bundle // its owner: kind, name, namespace and UID only
	labels map[string]string
	status fleet.RolloutStatus // its revisions' values taken out
	// values are the Helm values the pass took out of the status's revisions, by valuesHash.
	values map[string]map[string][]byte
	// written is the resourceVersion the status write got: the status stays the passes' input
	// until the cache shows that version (a pass reading the older one in between would, for
	// one, start the rollout of the revision again).
	written string
}

func newRolloutWriter(ctx context.Context, a apply.Apply, rollouts fleetcontrollers.RolloutController,
	secrets corecontrollers.SecretCache, secretWriter corecontrollers.SecretClient) *rolloutWriter {
	w := &rolloutWriter{rollouts: rollouts, wanted: map[string]*wantedRollout{}, secrets: secrets, secretWriter: secretWriter,
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
func (w *rolloutWriter) publish(b *fleet.Bundle, roll *fleet.Rollout, st fleet.RolloutStatus) error {
	labels := rolloutLabels(b)
	key := b.Namespace + "/" + b.Name
	st = *st.DeepCopy()
	values := map[string]map[string][]byte{}
	if w.secretWriter != nil {
		for _, r := range []*fleet.RolloutRevision{st.Current, st.Passed} {
			data, err := bundlevalues.TakeFromRevision(r)
			if err != nil {
				return fmt.Errorf("rollout %s: %w", key, err)
			}
			if data != nil {
				values[r.ValuesHash] = data
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if roll != nil && equality.Semantic.DeepEqual(roll.Status, st) && labelsContain(roll.Labels, labels) {
		delete(w.wanted, key)
		return nil
	}
	owner := &fleet.Bundle{TypeMeta: metav1.TypeMeta{APIVersion: fleet.SchemeGroupVersion.String(), Kind: "Bundle"},
		ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: b.Namespace, UID: b.UID}}
	// The values an earlier pass handed over and its writer has not written yet stay with the
	// revisions that name them (this pass read those revisions from that hand-over, without).
	if prev := w.wanted[key]; prev != nil {
		for _, r := range []*fleet.RolloutRevision{st.Current, st.Passed} {
			if r != nil && values[r.ValuesHash] == nil && prev.values[r.ValuesHash] != nil {
				values[r.ValuesHash] = prev.values[r.ValuesHash]
			}
		}
	}
	w.wanted[key] = &wantedRollout{bundle: owner, labels: labels, status: st, values: values}
	w.rollouts.Enqueue(b.Namespace, b.Name)
	return nil
}

// restore is kept, a revision of b's Rollout, with its Helm values put back: from the last
// pass's hand-over when it is not written yet, else from the Rollout's revision-values Secret.
func (w *rolloutWriter) restore(b *fleet.Bundle, kept *fleet.RolloutRevision) (*fleet.RolloutRevision, error) {
	if kept == nil || kept.ValuesHash == "" {
		return kept, nil
	}
	w.mu.Lock()
	var data map[string][]byte
	if want := w.wanted[b.Namespace+"/"+b.Name]; want != nil {
		data = want.values[kept.ValuesHash]
	}
	w.mu.Unlock()
	if data != nil {
		return bundlevalues.WithValues(kept, data, "the Helm values of revision "+kept.Revision+" handed over by the last pass")
	}
	return RevisionValues(w.secrets, w.secretWriter, b.Namespace, b.Name, kept)
}

// writeValues writes the Helm values of the revisions the status of roll keeps into roll's
// revision-values Secret, before the status: each from the pass's hand-over, else from the
// Secret as it is (a revision that moved from current to passed keeps its values).
func (w *rolloutWriter) writeValues(roll *fleet.Rollout, want *wantedRollout) error {
	if w.secretWriter == nil {
		return nil
	}
	name := bundlevalues.RevisionSecretName(roll.Name)
	var have map[string][]byte
	if w.secrets != nil {
		if s, err := w.secrets.Get(roll.Namespace, name); err == nil && s.Type == fleet.SecretTypeRevisionValues {
			have = s.Data
		}
	}
	live := false
	keep := map[string]map[string][]byte{}
	for _, r := range []*fleet.RolloutRevision{want.status.Current, want.status.Passed} {
		if r == nil || r.ValuesHash == "" {
			continue
		}
		data := want.values[r.ValuesHash]
		if data == nil {
			data = bundlevalues.RevisionValues(have, r.ValuesHash)
		}
		if data == nil && !live {
			// The cache may not show the Secret's last write yet (the revision that passed was
			// current a moment ago): the apiserver's copy decides.
			live = true
			s, err := w.secretWriter.Get(roll.Namespace, name, metav1.GetOptions{})
			switch {
			case err == nil && s.Type == fleet.SecretTypeRevisionValues:
				have = s.Data
				data = bundlevalues.RevisionValues(have, r.ValuesHash)
			case err != nil && !apierrors.IsNotFound(err):
				return fmt.Errorf("secret %s/%s: %w", roll.Namespace, name, err)
			}
		}
		if data != nil {
			keep[r.ValuesHash] = data
		}
	}
	if len(keep) == 0 {
		return nil
	}
	data := bundlevalues.RevisionData(keep)
	if maps.EqualFunc(have, data, func(a, b []byte) bool { return string(a) == string(b) }) {
		return nil
	}
	owner := bundlevalues.RevisionOwner("Rollout", roll.Name, roll.UID)
	return WriteRevisionValues(w.secretWriter, bundlevalues.RevisionSecret(roll.Namespace, owner, data))
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
		if err := w.writeValues(roll, want); err != nil {
			return roll, err
		}
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
