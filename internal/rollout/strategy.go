package rollout

import fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"

// Strategy decides a pass over a Bundle's targets: the bundle pass asks it about each target,
// in its Order, and writes what it decides. Fleet's partitions are one strategy (Partitions);
// a RolloutPolicy's stages are the other (Staged).
type Strategy interface {
	// Order is the target indexes in the order they are decided.
	Order() []int
	// Decide is what target k's deployment (cur, nil when there is none) does in this pass;
	// deploymentID is what it would get from the Bundle as it is now.
	Decide(k int, cur *fleet.BundleDeployment, deploymentID string) Decision
}

// Staged is a RolloutPolicy's strategy: the decisions Evaluate made for the pass.
type Staged struct{ Result }

// Order is the targets' own order: Evaluate decided them all at once.
func (s *Staged) Order() []int {
	out := make([]int, len(s.Decisions))
	for k := range out {
		out[k] = k
	}
	return out
}

// Decide is Evaluate's decision for target k.
func (s *Staged) Decide(k int, _ *fleet.BundleDeployment, _ string) Decision { return s.Decisions[k] }
