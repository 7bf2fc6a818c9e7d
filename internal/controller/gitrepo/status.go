package gitrepo

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleetgo/fleet/internal/controller/index"
	"github.com/fleetgo/fleet/internal/summary"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// rollup fills the status from the GitRepo's Bundles and BundleDeployments.
func (h *handler) rollup(gr *fleet.GitRepo, status *fleet.GitRepoStatus, now time.Time) {
	bundles, _ := h.Bundles.Cache().GetByIndex(bundlesByRepo, gr.Namespace+"/"+gr.Name)
	sort.Slice(bundles, func(i, j int) bool { return bundles[i].Name < bundles[j].Name })
	bds, _ := h.BundleDeployments.Cache().GetByIndex(index.ByRepo, gr.Namespace+"/"+gr.Name)
	t := h.tally(bundles, bds, now)
	s := t.summary
	status.Summary, status.ResourceCounts = s, t.counts
	status.PerClusterResourceCounts = nil
	if len(t.perClusterCounts) > 0 {
		status.PerClusterResourceCounts = t.perClusterCounts
	}
	status.Resources = summary.Resources(t.perCluster)
	status.DesiredReadyClusters, status.ReadyClusters = len(t.clusters), 0
	for _, ready := range t.clusters {
		if ready {
			status.ReadyClusters++
		}
	}
	status.Display.ReadyBundleDeployments = fmt.Sprintf("%d/%d", s.Ready, s.DesiredReady)
	status.Display.Error, status.Display.Message = false, ""

	ready, msg := readiness(status, bundles, s)
	switch {
	case status.GitJobStatus == JobInProgress:
		status.Display.State = StateGitUpdating
	case ready == corev1.ConditionTrue:
		// Empty when ready, as Fleet writes it: Rancher shows such a GitRepo Active.
		status.Display.State = ""
	default:
		status.Display.State = string(summary.WorstState(s))
		if status.Display.State == "" || status.Display.State == string(fleet.Ready) {
			status.Display.State = "NotReady"
		}
		status.Display.Error, status.Display.Message = ready == corev1.ConditionFalse, msg
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionReady, ready, summary.ReadyReason(ready, status.Display.State), msg, now)
	if st, reason, msg, ok := summary.Rollout(bundles); ok {
		fleet.SetCondition(&status.Conditions, fleet.ConditionRollout, st, reason, msg, now)
	}
	summary.SetHeld(&status.Conditions, bundles, now)
}

// tally is what a GitRepo's Bundles and BundleDeployments add up to.
type tally struct {
	summary          fleet.BundleSummary
	counts           fleet.ResourceCounts
	perCluster       []summary.Deployment
	perClusterCounts map[string]*fleet.ResourceCounts
	// clusters maps each cluster namespace to whether all its deployments are ready.
	clusters map[string]bool
}

func (h *handler) tally(bundles []*fleet.Bundle, bds []*fleet.BundleDeployment, now time.Time) tally {
	t := tally{perClusterCounts: map[string]*fleet.ResourceCounts{}, clusters: map[string]bool{}}
	interval := time.Duration(0)
	if h.CheckinInterval != nil {
		interval = h.CheckinInterval()
	}
	keys := map[string][]fleet.ResourceKey{}
	for _, b := range bundles {
		keys[b.Name] = b.Status.ResourceKey
		// Targets whose BundleDeployment is not made yet are known to their Bundle only.
		t.summary.Pending += b.Status.Summary.Pending
		t.summary.DesiredReady += b.Status.Summary.Pending
	}
	for _, bd := range bds {
		state := summary.State(bd)
		offline := false
		if c := h.cluster(bd); c != nil && interval > 0 && summary.Offline(c, interval, now) {
			state, offline = fleet.BundleState(""), true // unknown: counted in desiredReady only
		}
		cluster := bd.Labels[fleet.ClusterNamespaceLabel] + "/" + bd.Labels[fleet.ClusterLabel]
		t.perCluster = append(t.perCluster, summary.Deployment{BD: bd, Offline: offline, Cluster: cluster, Keys: keys[bd.Labels[fleet.BundleLabel]]})
		if offline || state == fleet.Ready {
			// (An unknown state counts as desired, not as any state.)
			summary.Increment(&t.summary, state)
		} else {
			// Only a non-ready deployment is listed, under a name built for it alone.
			summary.Add(&t.summary, bd.Labels[fleet.BundleLabel]+" on "+cluster, bd)
		}
		if rc := bd.Status.ResourceCounts; rc != nil {
			summary.AddCounts(&t.counts, *rc)
			pc := t.perClusterCounts[cluster]
			if pc == nil {
				pc = &fleet.ResourceCounts{}
				t.perClusterCounts[cluster] = pc
			}
			summary.AddCounts(pc, *rc)
		}
		ready, seen := t.clusters[bd.Namespace]
		t.clusters[bd.Namespace] = (ready || !seen) && state == fleet.Ready
	}
	return t
}

// readiness is the GitRepo's Ready condition: the first of a refused spec, a repository that
// cannot be polled, a failed run, nothing applied yet, a Bundle not processed at its spec yet or
// not ready, deployments not ready.
func readiness(status *fleet.GitRepoStatus, bundles []*fleet.Bundle, s fleet.BundleSummary) (corev1.ConditionStatus, string) {
	if c := fleet.FindCondition(status.Conditions, fleet.ConditionAccepted); c != nil && c.Status == corev1.ConditionFalse {
		return corev1.ConditionFalse, c.Message
	}
	if c := fleet.FindCondition(status.Conditions, fleet.ConditionGitPolling); c != nil && c.Status == corev1.ConditionFalse {
		return corev1.ConditionFalse, c.Message
	}
	if c := fleet.FindCondition(status.Conditions, fleet.ConditionStalled); c != nil && c.Status == corev1.ConditionTrue {
		return corev1.ConditionFalse, c.Message
	}
	if status.Commit == "" {
		// Nothing applied yet: no Bundles is not the same as all Bundles ready.
		return corev1.ConditionUnknown, "no commit applied yet"
	}
	for _, b := range bundles {
		if b.Status.ObservedGeneration != b.Generation {
			// Its status is of an earlier spec (or none yet): the deployments this commit
			// makes are not counted yet, so no count says it is ready.
			return corev1.ConditionUnknown, "Bundle " + b.Name + ": not processed yet"
		}
		if c := fleet.FindCondition(b.Status.Conditions, fleet.ConditionReady); c != nil && c.Status != corev1.ConditionTrue {
			return c.Status, "Bundle " + b.Name + ": " + c.Message
		}
	}
	if s.Ready < s.DesiredReady {
		return corev1.ConditionFalse, summary.ReadyMessage(s)
	}
	return corev1.ConditionTrue, ""
}

func (h *handler) cluster(bd *fleet.BundleDeployment) *fleet.Cluster {
	ns, name := bd.Labels[fleet.ClusterNamespaceLabel], bd.Labels[fleet.ClusterLabel]
	if ns == "" || name == "" {
		return nil
	}
	c, err := h.Clusters.Cache().Get(ns, name)
	if err != nil {
		return nil
	}
	return c
}
