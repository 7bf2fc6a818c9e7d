package bundle

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetgo/fleet/internal/controller/agentmanagement"
	"github.com/fleetgo/fleet/internal/ocistorage"
	"github.com/fleetgo/fleet/internal/policy"
	"github.com/fleetgo/fleet/internal/restriction"
	"github.com/fleetgo/fleet/internal/rollout"
	"github.com/fleetgo/fleet/internal/secretuse"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// ociRetry is how soon a Bundle whose registry Secret is missing or malformed is looked at again.
const ociRetry = 2 * time.Second

// deploy writes the Bundle's BundleDeployments and returns its status rolled up from them (the
// generated status handler writes it when it changed).
func (h *handler) deploy(b *fleet.Bundle, status fleet.BundleStatus) (fleet.BundleStatus, error) {
	if b.DeletionTimestamp != nil || !slices.Contains(b.Finalizers, fleet.BundleFinalizer) {
		return status, nil
	}

	// Planning and rendering are CPU work: run few passes at once, so the informers (which
	// Go schedules no differently from these) keep up with the watch.
	h.cpu <- struct{}{}
	var once sync.Once
	release := func() { once.Do(func() { <-h.cpu }) }
	defer release()

	if err := StoredValues(h.secrets, b); err != nil {
		// Written by Fleet's apply alongside the Bundle: it is there in a moment, or the
		// Bundle was moved without it (the message says which).
		return h.rollup(b, status, nil, nil, err), err
	}
	if refused, err := h.applyPolicies(b, &status); refused || err != nil {
		return status, err
	}
	oci, err := h.ociStorage(b)
	if err != nil {
		return h.ociRefused(b, status, err), nil
	}
	contentName, err := h.ensureContent(b)
	if err != nil {
		return status, err
	}
	// A user error (invalid selector, template error, rollout limit): report it and keep what
	// is deployed.
	key, plan, madeAt, planErr := h.planOf(b, contentName)
	if planErr != nil {
		return h.rollup(b, status, nil, nil, planErr), nil
	}
	// A SOPS file that does not decrypt, or a cluster without a key, fails the Bundle as a plan
	// error does: nothing is written, what is deployed stays.
	secrets, planErr := h.secretsOf(b, plan, contentName)
	if planErr != nil {
		return h.rollup(b, status, nil, nil, planErr), nil
	}
	result, d, requeue, err := h.sync(b, plan, contentName, oci, secrets, release)
	if err != nil {
		h.mem.planFailed(b)
		return status, err
	}
	h.mem.planWritten(b, key, madeAt, plan, h.reusable(b))
	if requeue {
		h.bundles.EnqueueAfter(b.Namespace, b.Name, requeueNew)
	}
	status = h.rollup(b, status, result, d, nil)
	d.holds.condition(&status, result, h.now)
	if d.progressive != nil {
		if err := h.record(b, d.progressive, &status); err != nil {
			return status, err
		}
	}
	status.OCIReference = ociRef(oci, b)
	return status, nil
}

// ociRef is the reference of b's contents in the registry that keeps them ("": none does).
func ociRef(oci *ocistorage.Storage, b *fleet.Bundle) string {
	if oci == nil {
		return ""
	}
	return oci.Ref(b.Spec.ContentsID)
}

// ociRefused is the status of a Bundle whose registry cannot be used, shown on the Bundle (an
// error returned from deploy would leave the status unwritten): a Secret refused as a credential
// stays refused; one missing or malformed is looked at again, as no watch tells when it is written.
func (h *handler) ociRefused(b *fleet.Bundle, status fleet.BundleStatus, err error) fleet.BundleStatus {
	var refused *secretuse.Refused
	if !errors.As(err, &refused) {
		h.bundles.EnqueueAfter(b.Namespace, b.Name, ociRetry)
	}
	return h.rollup(b, status, nil, nil, err)
}

// planOf is b's plan: the one kept from an earlier pass while nothing it read changed (the passes
// that follow a capped or rolling-up one reuse it), else a new one. A plan that fails is dropped,
// and so is one whose rollout limits are invalid.
func (h *handler) planOf(b *fleet.Bundle, contentName string) (planKey, []planned, time.Time, error) {
	now := h.now()
	key, kept, madeAt, reused := h.mem.keptPlan(b, contentName, now)
	if rs := b.Spec.RolloutStrategy; rs != nil {
		// A limit that is no number is no plan: no limit is assumed for it.
		if err := rollout.CheckStrategy(rs); err != nil {
			h.mem.planFailed(b)
			return key, nil, now, err
		}
	}
	if reused {
		return key, kept, madeAt, nil
	}
	plan, err := h.plan(b, contentName)
	if err != nil {
		h.mem.planFailed(b)
	}
	return key, plan, now, err
}

// reusable says whether b's plan may be kept for its next pass: not when its namespace has
// BundleNamespaceMappings, whose plans also read namespaces' labels, which nothing here watches.
func (h *handler) reusable(b *fleet.Bundle) bool {
	mappings, err := h.mappings.List(b.Namespace, labels.Everything())
	return err == nil && len(mappings) == 0
}

// applyPolicies applies the namespace's Policies to the Bundle (the handler's copy): a Bundle
// they refuse is Accepted=False naming the rule, and keeps what is deployed. The condition is
// kept only where the namespace has Policies (or had).
func (h *handler) applyPolicies(b *fleet.Bundle, status *fleet.BundleStatus) (bool, error) {
	bound, refused, err := h.checkRules(b)
	if err != nil {
		return false, err
	}
	if !bound && fleet.FindCondition(status.Conditions, fleet.ConditionAccepted) == nil {
		return false, nil
	}
	if refused != nil {
		fleet.SetCondition(&status.Conditions, fleet.ConditionAccepted, corev1.ConditionFalse, refused.reason, refused.err.Error(), h.now())
		*status = h.rollup(b, *status, nil, nil, refused.err)
		return true, nil
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionAccepted, corev1.ConditionTrue, "", "", h.now())
	return false, nil
}

// refusal is a rule refusing a Bundle: the condition's reason and the error naming the rule.
type refusal struct {
	reason string
	err    error
}

// checkRules applies the namespace's Policies and the GitRepoRestrictions that bind b to its
// spec (filling in their defaults): bound says there are any, refused names the one that
// refuses it.
func (h *handler) checkRules(b *fleet.Bundle) (bound bool, refused *refusal, err error) {
	var set policy.Set
	if h.policies != nil {
		ps, err := h.policies.Cache().List(b.Namespace, labels.Everything())
		if err != nil {
			return false, nil, err
		}
		set = policy.Combine(ps)
	}
	restricted, err := h.restrictions(b)
	if err != nil {
		return false, nil, err
	}
	if err := set.Bundle(&b.Spec); err != nil {
		return true, &refusal{"PolicyViolation", err}, nil
	}
	if err := restricted.Bundle(&b.Spec); err != nil {
		return true, &refusal{"Restricted", fmt.Errorf("GitRepoRestriction %s: %w", strings.Join(restricted.Names, ", "), err)}, nil
	}
	return set.Any || restricted.Any, nil, nil
}

// restrictions are the GitRepoRestrictions that bind the Bundle: its namespace's, unless it is
// the manager's own agent Bundle of a Cluster of the namespace (agentmanagement), which deploys
// the agent as the agent. Its name, labels and owner are not proof: a tenant can write all
// three. The Bundle must be exactly what the manager writes for that Cluster now (agent
// management rewrites one that differs), so a forged one is bound like any other.
func (h *handler) restrictions(b *fleet.Bundle) (restriction.Set, error) {
	if h.restrict == nil {
		return restriction.Set{}, nil
	}
	rs, err := h.restrict.Cache().List(b.Namespace, labels.Everything())
	if err != nil || len(rs) == 0 {
		return restriction.Set{}, err
	}
	if owner := metav1.GetControllerOf(b); h.agentBundle != nil && owner != nil && owner.Kind == "Cluster" &&
		b.Name == agentmanagement.BundleName(owner.Name) {
		if c, err := h.clusters.Get(b.Namespace, owner.Name); err == nil && c.UID == owner.UID && h.agentBundle(b, c) {
			return restriction.Set{}, nil
		}
	}
	return restriction.Combine(rs), nil
}

// planned is one targeted cluster: where its BundleDeployment goes (none yet when the cluster
// has no namespace) and what renders it.
type planned struct {
	cluster     *fleet.Cluster
	info        target.ClusterInfo
	match       *target.Match
	fingerprint [sha256.Size]byte
	namespace   string
	// desired is the BundleDeployment rendered while planning, for the pass that planned it
	// (a plan is kept without it); nil when the inputs had rendered before.
	desired *fleet.BundleDeployment
}

// plan matches every Cluster the Bundle may target and checks that each BundleDeployment
// renders: those whose inputs are new are rendered here, once, for the write.
func (h *handler) plan(b *fleet.Bundle, contentName string) ([]planned, error) {
	namespaces, err := h.clusterNamespaces(b)
	if err != nil {
		return nil, err
	}
	var clusters []*fleet.Cluster
	var groups []*fleet.ClusterGroup
	for _, ns := range namespaces {
		cs, err := h.clusters.List(ns, labels.Everything())
		if err != nil {
			return nil, err
		}
		gs, err := h.groups.List(ns, labels.Everything())
		if err != nil {
			return nil, err
		}
		clusters, groups = append(clusters, cs...), append(groups, gs...)
	}
	slices.SortFunc(clusters, byKey)
	// Selectors are parsed once per pass, not once per cluster.
	gm, err := target.NewGroupMatcher(groups)
	if err != nil {
		return nil, fmt.Errorf("targeting error: %w", err)
	}
	matcher, err := target.NewMatcher(b)
	if err != nil {
		// (Fleet's words, which alerts match on.)
		return nil, fmt.Errorf("targeting error: %w", err)
	}
	var out []planned
	var errs []error
	for _, c := range clusters {
		ci := target.ClusterInfo{Cluster: c, Groups: gm.Groups(c)}
		// Options are merged only when a deployment is rendered: most passes render none.
		m := matcher.Match(ci)
		if m == nil {
			continue
		}
		// The cluster controller records the namespace once it has created it.
		facts := h.mem.factsOf(c)
		ns := facts.namespace
		if c.Status.Namespace != ns {
			out = append(out, planned{cluster: c, info: ci})
			continue
		}
		if err := h.nameTaken(b, ns); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", c.Name, err))
			continue
		}
		fp := clusterFingerprint(facts.hash, ci, m)
		desired, err := checkRender(h.mem, b, ci, m, contentName, fp)
		if err != nil {
			// A per-cluster values template that fails is a targeting error to Fleet too.
			errs = append(errs, fmt.Errorf("targeting error: cluster %s: %w", c.Name, err))
			continue
		}
		out = append(out, planned{cluster: c, info: ci, match: m, fingerprint: fp, namespace: ns, desired: desired})
	}
	return out, errors.Join(errs...)
}

// nameTaken says when the BundleDeployment b would write in the cluster namespace ns is another
// Bundle's: a deployment is named after its Bundle alone (as in Fleet), so Bundles of one name
// in two namespaces that a BundleNamespaceMapping sends to one cluster would share it. The one
// there first keeps it; the other is not deployed to that cluster and says why.
func (h *handler) nameTaken(b *fleet.Bundle, ns string) error {
	bd, err := h.bdCache.Get(ns, b.Name)
	if err != nil || ownedBy(bd, b) {
		return nil
	}
	return collision(bd)
}

// ownedBy says whether bd is b's deployment (by the labels the controller writes).
func ownedBy(bd *fleet.BundleDeployment, b *fleet.Bundle) bool {
	return sameBundle(bd, b.Namespace, b.Name)
}

// sameBundle says whether bd is the deployment of Bundle namespace/name.
func sameBundle(bd *fleet.BundleDeployment, namespace, name string) bool {
	return bd.Labels[fleet.BundleNamespaceLabel] == namespace && bd.Labels[fleet.BundleLabel] == name
}

// collision is the error of a Bundle whose deployment's name bd, another Bundle's, holds.
func collision(bd *fleet.BundleDeployment) error {
	return fmt.Errorf("bundledeployment %s/%s is Bundle %s/%s's: Bundles of one name from namespaces a BundleNamespaceMapping "+
		"maps to one cluster cannot both deploy there (rename one)", bd.Namespace, bd.Name,
		bd.Labels[fleet.BundleNamespaceLabel], bd.Labels[fleet.BundleLabel])
}

// clusterNamespaces are the namespaces whose Clusters the Bundle may target (target.Reach): its
// own, and those its namespace's BundleNamespaceMappings open to it.
func (h *handler) clusterNamespaces(b *fleet.Bundle) ([]string, error) {
	mappings, err := h.mappings.List(b.Namespace, labels.Everything())
	if err != nil {
		return nil, err
	}
	return target.Reach(b, mappings, func(sel labels.Selector) ([]string, error) {
		nss, err := h.nsCache.List(sel)
		names := make([]string, 0, len(nss))
		for _, ns := range nss {
			names = append(names, ns.Name)
		}
		return names, err
	})
}

// byKey orders Clusters by their "namespace/name" keys. It compares names alone within a
// namespace, the common case, so that sorting ten thousand Clusters on every pass allocates
// nothing; across namespaces it compares the keys themselves (a namespace may be a prefix of
// another, where the two orders differ).
func byKey(a, b *fleet.Cluster) int {
	if a.Namespace == b.Namespace {
		return strings.Compare(a.Name, b.Name)
	}
	return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
}

// checkRender says whether the cluster's BundleDeployment renders, rendering it only when the
// memory has not seen these inputs: then it returns what was rendered.
func checkRender(mem *memory, b *fleet.Bundle, ci target.ClusterInfo, m *target.Match, content string, fp [sha256.Size]byte) (*fleet.BundleDeployment, error) {
	if seen, err := mem.renderSeen(b, ci.Cluster.UID, content, fp); seen {
		return nil, err
	}
	desired, err := render(b, ci, m, content)
	mem.rendered(b, ci.Cluster.UID, content, fp, err)
	return desired, err
}

// render renders the BundleDeployment for a cluster matched by MatchTargets.
func render(b *fleet.Bundle, ci target.ClusterInfo, m *target.Match, contentName string) (*fleet.BundleDeployment, error) {
	return target.Deployment(b, ci, &target.Match{Targets: m.Targets, Options: target.MergedOptions(b, m.Targets)}, contentName)
}
