// Package target decides where a Bundle goes and with which options: it matches Bundle targets
// against Clusters and their ClusterGroups, applies target restrictions, merges target
// customizations, renders per-cluster templated Helm values and computes deployment IDs. It is
// pure logic with no clients; the manager's bundle controller and `fleet target` use it.
package target

import (
	"fmt"
	"slices"
	"strconv"

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
	gm, err := NewGroupMatcher(all)
	if err != nil {
		return nil, err
	}
	return gm.Groups(c), nil
}

// GroupMatcher finds a cluster's groups among a fixed set, with their selectors parsed once.
type GroupMatcher struct {
	groups    []*fleet.ClusterGroup
	selectors []labels.Selector
}

// NewGroupMatcher parses the selectors of all; groups without a selector match no cluster.
func NewGroupMatcher(all []*fleet.ClusterGroup) (*GroupMatcher, error) {
	gm := &GroupMatcher{}
	for _, g := range all {
		if g.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(g.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("clustergroup %s/%s: invalid selector: %w", g.Namespace, g.Name, err)
		}
		gm.groups = append(gm.groups, g)
		gm.selectors = append(gm.selectors, sel)
	}
	return gm, nil
}

// Groups returns the groups of the cluster's namespace whose selector matches its labels.
func (gm *GroupMatcher) Groups(c *fleet.Cluster) []*fleet.ClusterGroup {
	var out []*fleet.ClusterGroup
	for i, g := range gm.groups {
		if g.Namespace == c.Namespace && gm.selectors[i].Matches(labels.Set(c.Labels)) {
			out = append(out, g)
		}
	}
	return out
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

// compiled is criteria with its selectors parsed.
type compiled struct {
	criteria
	clusterSel, groupSel labels.Selector
}

func (cr criteria) compile() (compiled, error) {
	c := compiled{criteria: cr}
	var err error
	if cr.clusterSelector != nil {
		if c.clusterSel, err = metav1.LabelSelectorAsSelector(cr.clusterSelector); err != nil {
			return c, fmt.Errorf("clusterSelector: %w", err)
		}
	}
	if cr.clusterGroupSelector != nil {
		if c.groupSel, err = metav1.LabelSelectorAsSelector(cr.clusterGroupSelector); err != nil {
			return c, fmt.Errorf("clusterGroupSelector: %w", err)
		}
	}
	return c, nil
}

// matches reports whether the cluster meets every criterion that is set.
func (cr criteria) matches(ci ClusterInfo) (bool, error) {
	c, err := cr.compile()
	if err != nil {
		return false, err
	}
	return c.matches(ci), nil
}

// matches reports whether the cluster meets every criterion that is set. Criteria with nothing
// set match no cluster: a target must say where it goes.
func (cr compiled) matches(ci ClusterInfo) bool {
	if cr.clusterName == "" && cr.clusterSelector == nil && cr.clusterGroup == "" && cr.clusterGroupSelector == nil {
		return false
	}
	c := ci.Cluster
	if cr.clusterName != "" && cr.clusterName != c.Name {
		return false
	}
	if cr.clusterSel != nil && !cr.clusterSel.Matches(labels.Set(c.Labels)) {
		return false
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
			return false
		}
	}
	if cr.groupSel != nil {
		found := false
		for _, g := range ci.Groups {
			if cr.groupSel.Matches(labels.Set(g.Labels)) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
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
	// The matcher's Match is shared: fill in a copy.
	out := &Match{Targets: m.Targets, Options: MergedOptions(b, m.Targets)}
	return out, nil
}

// MatchTargets is MatchCluster without merging the options: the matched targets only.
func MatchTargets(b *fleet.Bundle, ci ClusterInfo) (*Match, error) {
	m, err := NewMatcher(b)
	if err != nil {
		return nil, err
	}
	return m.Match(ci), nil
}

// Matcher matches one Bundle's targets and target restrictions against many clusters, with
// their selectors parsed once.
type Matcher struct {
	b            *fleet.Bundle
	restrictions []compiled
	targets      []compiled
	// shared holds one Match per set of matched targets, keyed by their indexes: a plan over
	// thousands of clusters, most matching the same target, allocates a few.
	shared map[string]*Match
}

// NewMatcher parses the Bundle's selectors; an invalid one is an error naming it, whether or
// not any cluster would reach it.
func NewMatcher(b *fleet.Bundle) (*Matcher, error) {
	m := &Matcher{b: b, shared: map[string]*Match{}}
	for i := range b.Spec.TargetRestrictions {
		c, err := fromRestriction(&b.Spec.TargetRestrictions[i]).compile()
		if err != nil {
			return nil, fmt.Errorf("targetRestrictions[%d].%w", i, err)
		}
		m.restrictions = append(m.restrictions, c)
	}
	for i := range b.Spec.Targets {
		c, err := fromTarget(&b.Spec.Targets[i]).compile()
		if err != nil {
			return nil, fmt.Errorf("targets[%d].%w", i, err)
		}
		m.targets = append(m.targets, c)
	}
	return m, nil
}

// Match returns the matched targets for the cluster, without options; nil when the Bundle does
// not go there. Clusters matching the same targets get the same Match: callers must not modify
// it. A Matcher is for one goroutine.
func (mt *Matcher) Match(ci ClusterInfo) *Match {
	b := mt.b
	if len(mt.restrictions) > 0 {
		allowed := false
		for _, r := range mt.restrictions {
			if r.matches(ci) {
				allowed = true
				break
			}
		}
		if !allowed {
			return nil
		}
	}
	var buf [8]int
	matched := buf[:0]
	for i, t := range mt.targets {
		if !t.matches(ci) {
			continue
		}
		if b.Spec.Targets[i].DoNotDeploy {
			return nil
		}
		matched = append(matched, i)
		if b.Spec.TargetCustomizationMode != "AllMatches" {
			break
		}
	}
	if len(matched) == 0 {
		return nil
	}
	var kb [64]byte
	key := kb[:0]
	for _, i := range matched {
		key = append(strconv.AppendInt(key, int64(i), 10), ',')
	}
	if m, ok := mt.shared[string(key)]; ok {
		return m
	}
	m := &Match{Targets: slices.Clone(matched)}
	mt.shared[string(key)] = m
	return m
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

// StageMatcher returns whether a rollout stage's selectors (clusterName, clusterSelector,
// clusterGroup: all that are set) match a cluster, and false for selects when the stage sets
// none of them.
func StageMatcher(s *fleet.RolloutStage) (match func(ClusterInfo) bool, selects bool, err error) {
	cr := criteria{clusterName: s.ClusterName, clusterSelector: s.ClusterSelector, clusterGroup: s.ClusterGroup}
	c, err := cr.compile()
	if err != nil {
		return nil, false, err
	}
	selects = s.ClusterName != "" || s.ClusterSelector != nil || s.ClusterGroup != ""
	return c.matches, selects, nil
}
