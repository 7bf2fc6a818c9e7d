// Package target decides where a Bundle goes and with which options: it matches Bundle targets
// against Clusters and their ClusterGroups, applies target restrictions, merges target
// customizations, renders per-cluster templated Helm values and computes deployment IDs. It is
// pure logic with no clients; the manager's bundle controller and `fleet target` use it.
package target

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// ClusterInfo is a Cluster with the ClusterGroups it belongs to.
type ClusterInfo struct {
	Cluster *fleet.Cluster
	Groups  []*fleet.ClusterGroup
}

// Groups returns the groups among all whose selector matches the cluster's labels; groups are
// matched within the cluster's namespace.
func Groups(c *fleet.Cluster, all []*fleet.ClusterGroup) ([]*fleet.ClusterGroup, error) {
	var out []*fleet.ClusterGroup
	for _, g := range all {
		if g.Namespace != c.Namespace || g.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(g.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("clustergroup %s/%s: invalid selector: %w", g.Namespace, g.Name, err)
		}
		if sel.Matches(labels.Set(c.Labels)) {
			out = append(out, g)
		}
	}
	return out, nil
}

// criteria is what BundleTarget, BundleTargetRestriction and Partition have in common.
type criteria struct {
	clusterName          string
	clusterSelector      *metav1.LabelSelector
	clusterGroup         string
	clusterGroupSelector *metav1.LabelSelector
}

func fromTarget(t *fleet.BundleTarget) criteria {
	return criteria{t.ClusterName, t.ClusterSelector, t.ClusterGroup, t.ClusterGroupSelector}
}

func fromRestriction(r *fleet.BundleTargetRestriction) criteria {
	return criteria{r.ClusterName, r.ClusterSelector, r.ClusterGroup, r.ClusterGroupSelector}
}

// FromPartition returns the selection criteria of a rollout partition.
func fromPartition(p *fleet.Partition) criteria {
	return criteria{p.ClusterName, p.ClusterSelector, p.ClusterGroup, p.ClusterGroupSelector}
}

// matches reports whether the cluster meets every criterion that is set. Criteria with nothing
// set match no cluster: a target must say where it goes.
func (cr criteria) matches(ci ClusterInfo) (bool, error) {
	if cr.clusterName == "" && cr.clusterSelector == nil && cr.clusterGroup == "" && cr.clusterGroupSelector == nil {
		return false, nil
	}
	c := ci.Cluster
	if cr.clusterName != "" && cr.clusterName != c.Name {
		return false, nil
	}
	if cr.clusterSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(cr.clusterSelector)
		if err != nil {
			return false, fmt.Errorf("clusterSelector: %w", err)
		}
		if !sel.Matches(labels.Set(c.Labels)) {
			return false, nil
		}
	}
	if cr.clusterGroup != "" {
		found := false
		for _, g := range ci.Groups {
			if g.Name == cr.clusterGroup {
				found = true
				break
			}
		}
		if !found {
			return false, nil
		}
	}
	if cr.clusterGroupSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(cr.clusterGroupSelector)
		if err != nil {
			return false, fmt.Errorf("clusterGroupSelector: %w", err)
		}
		found := false
		for _, g := range ci.Groups {
			if sel.Matches(labels.Set(g.Labels)) {
				found = true
				break
			}
		}
		if !found {
			return false, nil
		}
	}
	return true, nil
}

// Match is the outcome for one cluster.
type Match struct {
	// Targets are the indexes of the bundle's targets that matched, in order; with FirstMatch
	// only the first.
	Targets []int
	// Options are the bundle's options merged with the matched targets' customizations.
	Options fleet.BundleDeploymentOptions
}

// MatchCluster decides whether bundle b deploys to the cluster and with which options. It
// returns nil when the bundle does not go there: no target matches, a matched target says
// doNotDeploy, or the cluster is outside the target restrictions.
func MatchCluster(b *fleet.Bundle, ci ClusterInfo) (*Match, error) {
	m, err := MatchTargets(b, ci)
	if m == nil || err != nil {
		return m, err
	}
	m.Options = MergedOptions(b, m.Targets)
	return m, nil
}

// MatchTargets is MatchCluster without merging the options: the matched targets only, for
// callers that match many clusters and render few of them.
func MatchTargets(b *fleet.Bundle, ci ClusterInfo) (*Match, error) {
	if len(b.Spec.TargetRestrictions) > 0 {
		allowed := false
		for i := range b.Spec.TargetRestrictions {
			ok, err := fromRestriction(&b.Spec.TargetRestrictions[i]).matches(ci)
			if err != nil {
				return nil, fmt.Errorf("targetRestrictions[%d].%w", i, err)
			}
			if ok {
				allowed = true
				break
			}
		}
		if !allowed {
			return nil, nil
		}
	}
	m := &Match{}
	for i := range b.Spec.Targets {
		ok, err := fromTarget(&b.Spec.Targets[i]).matches(ci)
		if err != nil {
			return nil, fmt.Errorf("targets[%d].%w", i, err)
		}
		if !ok {
			continue
		}
		if b.Spec.Targets[i].DoNotDeploy {
			return nil, nil
		}
		m.Targets = append(m.Targets, i)
		if b.Spec.TargetCustomizationMode != "AllMatches" {
			break
		}
	}
	if len(m.Targets) == 0 {
		return nil, nil
	}
	return m, nil
}

// MergedOptions are the bundle's options with the customizations of the given targets merged
// in, in order.
func MergedOptions(b *fleet.Bundle, targets []int) fleet.BundleDeploymentOptions {
	opts := *b.Spec.BundleDeploymentOptions.DeepCopy()
	for _, i := range targets {
		opts = Merge(opts, b.Spec.Targets[i].BundleDeploymentOptions)
	}
	return opts
}

// PartitionIndex returns the index of the first partition whose criteria match the cluster, or
// -1 when none does.
func PartitionIndex(parts []fleet.Partition, ci ClusterInfo) (int, error) {
	for i := range parts {
		ok, err := fromPartition(&parts[i]).matches(ci)
		if err != nil {
			return -1, fmt.Errorf("rolloutStrategy.partitions[%d].%w", i, err)
		}
		if ok {
			return i, nil
		}
	}
	return -1, nil
}
