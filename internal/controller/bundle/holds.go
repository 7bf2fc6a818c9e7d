package bundle

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/fleetgo/fleet/internal/logfields"
	"github.com/fleetgo/fleet/internal/names"
	"github.com/fleetgo/fleet/internal/rollout"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A user's rollback (`fleet rollback`, the UI) is a hold in the Bundle's BundleHistory: the
// clusters it names run an earlier revision of the Bundle again, its content and options as the
// deployment history recorded them (the BundleRevision's sealed inputs), for as long as the
// Bundle stays at the revision the hold was made over. The hold, like a Rollout's status, is
// input: the revision must be this Bundle's (its seal verifies) and meet the namespace's rules
// as they stand, else the clusters keep what they run and the Held condition says why.

// holds are the holds in force for a Bundle this pass.
type holds struct {
	// byCluster is the hold of each held cluster ("namespace/name"): the last hold naming it.
	byCluster map[string]*held
	// over is every hold in force, in spec order.
	over []*held
	// staged is the last staged hold in force (nil: none): it goes through the Bundle's
	// RolloutPolicy (stagedhold.go).
	staged *held
}

// held is one hold in force and the revision it returns to, made once a cluster needs it.
type held struct {
	hold   *fleet.RevisionHold
	commit string
	inputs *fleet.RolloutRevision
	bundle *fleet.Bundle
	match  *target.Matcher
	// err says why the revision cannot be deployed (nil: it can, as far as made).
	err  error
	made bool
	// clusters counts the clusters whose deployment the pass leaves at the held revision.
	clusters int
}

// holdsOf reads the holds in force for b: nil when there are none. A hold is in force while
// the Bundle, as stored, is at the revision it was made over (rollout.RevisionOf, as `fleet
// rollback` read it: the handler's copy has its values and policy defaults filled in).
func (h *handler) holdsOf(b *fleet.Bundle) (*holds, error) {
	if h.histories == nil {
		return nil, nil
	}
	hist, err := h.histories.Get(b.Namespace, b.Name)
	if apierrors.IsNotFound(err) || err == nil && len(hist.Spec.Holds) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	stored, err := h.bundles.Cache().Get(b.Namespace, b.Name)
	if err != nil {
		return nil, err
	}
	revision, err := rollout.RevisionOf(stored)
	if err != nil {
		return nil, err
	}
	var out *holds
	for i := range hist.Spec.Holds {
		hold := &hist.Spec.Holds[i]
		if hold.Over != revision {
			continue // made over an earlier revision of the Bundle: released
		}
		if out == nil {
			out = &holds{byCluster: map[string]*held{}}
		}
		one := &held{hold: hold}
		one.inputs, one.commit, one.err = h.heldRevision(b, hold.Revision)
		out.over = append(out.over, one)
		if hold.Staged {
			out.staged = one
		}
		for _, c := range hold.Clusters {
			out.byCluster[c] = one
		}
	}
	return out, nil
}

// heldRevision is what the deployment history recorded that revision deploys, and its commit.
func (h *handler) heldRevision(b *fleet.Bundle, revision string) (*fleet.RolloutRevision, string, error) {
	o, err := h.revisions.Get(b.Namespace, names.SafeConcatName(b.Name, revision))
	switch {
	case apierrors.IsNotFound(err):
		return nil, "", fmt.Errorf("revision %s: the deployment history has no record of it (past its retention, or never run)", revision)
	case err != nil:
		return nil, "", err
	case o.Spec.Bundle != b.Name || o.Spec.Revision != revision:
		return nil, "", fmt.Errorf("revision %s: bundlerevision %s/%s is another revision's", revision, o.Namespace, o.Name)
	case o.Spec.Inputs == nil || o.Spec.Inputs.Revision != revision:
		return nil, "", fmt.Errorf("revision %s: the deployment history did not record what it deploys (the Bundle had moved on when it was first seen)", revision)
	}
	in, err := RevisionValues(h.secrets, h.secretWriter, o.Namespace, o.Name, o.Spec.Inputs)
	if err != nil {
		return nil, "", fmt.Errorf("revision %s: %w", revision, err)
	}
	return in, o.Spec.Commit, nil
}

// of is the hold of cluster c (nil: it is not held).
func (hs *holds) of(c *fleet.Cluster) *held {
	if hs == nil {
		return nil
	}
	return hs.byCluster[c.Namespace+"/"+c.Name]
}

// make checks the held revision (its seal, the namespace's rules) and makes the Bundle as it
// had it, once; false (and why, in one.err) when it cannot be deployed.
func (one *held) make(h *handler, b *fleet.Bundle) bool {
	if !one.made && one.err == nil {
		one.made = true
		verify := func(b *fleet.Bundle, r *fleet.RolloutRevision) error {
			if !h.seal.valid(b, r) {
				return fmt.Errorf("revision %s: its record was not made by the fleet manager for this Bundle (its seal does not verify)", r.Revision)
			}
			return nil
		}
		one.bundle, one.match, one.err = keptBundle(b, one.inputs, verify, h.checkRules)
	}
	return one.err == nil
}

// render is the cluster's BundleDeployment at the held revision, desired's options staged; nil
// (and why, in one.err) when the revision cannot be deployed or does not target the cluster.
func (one *held) render(h *handler, b *fleet.Bundle, ci target.ClusterInfo, desired, cur *fleet.BundleDeployment) *fleet.BundleDeployment {
	if !one.make(h, b) {
		return nil
	}
	m := one.match.Match(ci)
	if m == nil {
		return nil
	}
	old, err := render(one.bundle, ci, m, one.inputs.Content)
	if err != nil {
		logrus.WithFields(logfields.For("bundle", b.Namespace, b.Name)).WithField("cluster", ci.Cluster.Name).
			Warnf("not held at revision %s: %v", one.hold.Revision, err)
		return nil
	}
	next := atKept(desired, old, one.inputs.Content, cur)
	next.Annotations[fleet.HeldAnnotation] = one.hold.Revision
	return next
}

// mustWrite says a cluster's deployment needs writing though its inputs did not change: it is
// held and does not run the held revision yet, or it is released.
func (hs *holds) mustWrite(c *fleet.Cluster, cur *fleet.BundleDeployment) bool {
	if cur == nil {
		return false
	}
	if one := hs.of(c); one != nil {
		return one.err == nil && cur.Annotations[fleet.HeldAnnotation] != one.hold.Revision
	}
	return cur.Annotations[fleet.HeldAnnotation] != ""
}

// condition sets the Bundle's Held condition from the pass's holds: the clusters held, at which
// revision, and why not where a hold cannot be kept. None when nothing is held.
func (hs *holds) condition(status *fleet.BundleStatus, result []synced, now func() time.Time) {
	if hs == nil || len(hs.over) == 0 {
		fleet.RemoveCondition(&status.Conditions, fleet.ConditionHeld)
		return
	}
	for _, s := range result {
		if one := hs.of(s.cluster); one != nil && s.bd != nil && s.bd.Annotations[fleet.HeldAnnotation] == one.hold.Revision {
			one.clusters++
		}
	}
	var msgs []string
	refused := false
	for _, one := range hs.over {
		if one.err != nil {
			refused = true
			msgs = append(msgs, fmt.Sprintf("not held at revision %s: %v", one.hold.Revision, one.err))
			continue
		}
		m := fmt.Sprintf("%d of %d clusters held at revision %s", one.clusters, len(one.hold.Clusters), one.hold.Revision)
		if one.commit != "" {
			m += " (commit " + shortCommit(one.commit) + ")"
		}
		m += " since " + one.hold.Since.UTC().Format(time.RFC3339)
		if one.hold.Reason != "" {
			m += ": " + one.hold.Reason
		}
		msgs = append(msgs, m)
	}
	sort.Strings(msgs)
	cond, reason := corev1.ConditionTrue, "RolledBack"
	if refused {
		cond, reason = corev1.ConditionFalse, "HoldRefused"
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionHeld, cond, reason,
		strings.Join(msgs, "; ")+"; the Bundle's next revision releases them (or fleet rollback --release)", now())
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
