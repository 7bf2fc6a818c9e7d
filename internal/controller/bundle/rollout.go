package bundle

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetgo/fleet/internal/summary"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Rollout defaults, as Fleet documents them.
const (
	defaultAutoPartitionThreshold = 200
	defaultAutoPartitionSize      = "25%"
)

// partition is a group of targets promoted together.
type partition struct {
	name           string
	maxUnavailable int
	members        []int // indexes into the plan
	unavailable    int
	// outdated counts members left on older options in this pass.
	outdated int
}

// rollout decides, target by target, whether staged options may be promoted: never while the
// Bundle is paused; otherwise partition by partition, while the unavailable targets stay within
// the partition's and the Bundle's maxUnavailable, and stopping at the first partitions that are
// too unavailable once more than maxUnavailablePartitions are.
type rollout struct {
	paused bool
	// created is how many BundleDeployments the pass created (status.newlyCreated).
	created                  int
	maxUnavailable           int
	unavailable              int
	maxUnavailablePartitions int
	unavailablePartitions    int
	partitions               []*partition
	// progressive, when the Bundle names a RolloutPolicy, decides instead (progressive.go).
	progressive *progressive
}

func scaled(v *intstr.IntOrString, total int, def intstr.IntOrString) int {
	if v == nil {
		v = &def
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, total, false)
	if err != nil {
		return total
	}
	return n
}

// checkStrategy refuses a rollout strategy whose limits are neither a number nor a percentage:
// taken as "no limit" they would let every cluster go unavailable at once (fail open).
func checkStrategy(rs *fleet.RolloutStrategy) error {
	check := func(field string, v *intstr.IntOrString) error {
		if v == nil {
			return nil
		}
		if _, err := intstr.GetScaledValueFromIntOrPercent(v, 100, false); err != nil {
			return fmt.Errorf("rolloutStrategy.%s %q: not a number or a percentage", field, v.String())
		}
		return nil
	}
	errs := []error{check("maxUnavailable", rs.MaxUnavailable), check("maxUnavailablePartitions", rs.MaxUnavailablePartitions),
		check("autoPartitionSize", rs.AutoPartitionSize)}
	for i, p := range rs.Partitions {
		errs = append(errs, check(fmt.Sprintf("partitions[%d].maxUnavailable", i), p.MaxUnavailable))
	}
	return errors.Join(errs...)
}

// newRollout splits the planned targets into partitions and counts what is unavailable now.
func newRollout(b *fleet.Bundle, plan []planned, existing map[string]*fleet.BundleDeployment) (*rollout, error) {
	var targets []int
	for i, p := range plan {
		if p.namespace != "" {
			targets = append(targets, i)
		}
	}
	rs := b.Spec.RolloutStrategy
	if rs == nil {
		rs = &fleet.RolloutStrategy{}
	}
	if err := checkStrategy(rs); err != nil {
		return nil, err
	}
	r := &rollout{paused: b.Spec.Paused}
	r.maxUnavailable = max(scaled(rs.MaxUnavailable, len(targets), intstr.FromString("100%")), 1)
	if len(rs.Partitions) > 0 {
		if err := r.partitionAsDeclared(rs, plan, targets); err != nil {
			return nil, err
		}
	} else {
		r.partitionAutomatically(rs, targets)
	}
	// A percentage is of the partitions, so it is scaled once they are known.
	r.maxUnavailablePartitions = scaled(rs.MaxUnavailablePartitions, len(r.partitions), intstr.FromInt32(0))
	for _, part := range r.partitions {
		for _, i := range part.members {
			if cur := existing[plan[i].namespace]; cur == nil || unavailable(cur) {
				part.unavailable++
				r.unavailable++
			}
		}
	}
	return r, nil
}

// partitionAsDeclared puts each target into the first partition of the strategy whose
// selectors match it; the rest make a last partition, "unpartitioned".
func (r *rollout) partitionAsDeclared(rs *fleet.RolloutStrategy, plan []planned, targets []int) error {
	rest := &partition{name: "unpartitioned", maxUnavailable: r.maxUnavailable}
	for _, p := range rs.Partitions {
		r.partitions = append(r.partitions, &partition{name: p.Name})
	}
	for _, i := range targets {
		idx, err := target.PartitionIndex(rs.Partitions, plan[i].info)
		if err != nil {
			return err
		}
		if idx < 0 {
			rest.members = append(rest.members, i)
			continue
		}
		r.partitions[idx].members = append(r.partitions[idx].members, i)
	}
	for k, p := range rs.Partitions {
		part := r.partitions[k]
		part.maxUnavailable = scaled(p.MaxUnavailable, len(part.members), intstr.FromInt32(int32(r.maxUnavailable)))
		if p.MaxUnavailable == nil {
			part.maxUnavailable = r.maxUnavailable
		}
	}
	if len(rest.members) > 0 {
		r.partitions = append(r.partitions, rest)
	}
	return nil
}

// partitionAutomatically cuts the targets into partitions of autoPartitionSize once there are
// autoPartitionThreshold of them, else keeps them in one ("All").
func (r *rollout) partitionAutomatically(rs *fleet.RolloutStrategy, targets []int) {
	threshold := defaultAutoPartitionThreshold
	if rs.AutoPartitionThreshold != nil {
		threshold = *rs.AutoPartitionThreshold
	}
	size := len(targets)
	if len(targets) >= threshold {
		size = max(scaled(rs.AutoPartitionSize, len(targets), intstr.FromString(defaultAutoPartitionSize)), 1)
	}
	for start := 0; start < len(targets); start += max(size, 1) {
		end := min(start+max(size, 1), len(targets))
		name := "All"
		if size < len(targets) {
			name = fmt.Sprintf("Partition %d", start/size)
		}
		r.partitions = append(r.partitions, &partition{name: name, maxUnavailable: r.maxUnavailable, members: targets[start:end]})
	}
}

// order returns the plan indexes in partition order, with each one's partition.
func (r *rollout) order() ([]int, []*partition) {
	var idx []int
	var parts []*partition
	for _, p := range r.partitions {
		for _, i := range p.members {
			idx = append(idx, i)
			parts = append(parts, p)
		}
	}
	return idx, parts
}

// apply returns the BundleDeployment to write for a target of partition p: the desired options
// always staged, promoted when the rollout allows.
func (r *rollout) apply(p *partition, desired, cur *fleet.BundleDeployment) *fleet.BundleDeployment {
	next := desired.DeepCopy()
	if cur != nil && cur.Spec.DeploymentID == desired.Spec.DeploymentID {
		return next
	}
	promote := !r.paused && r.partitionOpen(p)
	wasAvailable := cur != nil && !unavailable(cur)
	// Promoting an available target makes it unavailable until the agent has deployed it; a
	// target that is unavailable anyway costs nothing more.
	// A partition may always take one target, so a limit of 0 still lets a canary through.
	if promote && wasAvailable && (r.unavailable >= r.maxUnavailable || p.unavailable >= max(p.maxUnavailable, 1)) {
		promote = false
	}
	if promote {
		if wasAvailable {
			r.unavailable++
			p.unavailable++
		}
		return next
	}
	p.outdated++
	if cur != nil {
		next.Spec.Options = *cur.Spec.Options.DeepCopy()
		next.Spec.DeploymentID = cur.Spec.DeploymentID
		next.Spec.CorrectDrift = cur.Spec.CorrectDrift
		// The content label names what is deployed, so the Content the agent may still need is
		// not collected while the new one waits.
		next.Labels[fleet.ContentNameLabel] = cur.Labels[fleet.ContentNameLabel]
	} else {
		next.Spec.Options = fleet.BundleDeploymentOptions{}
		next.Spec.DeploymentID = ""
	}
	return next
}

// partitionOpen reports whether targets of p may be promoted: no more partitions before it are
// over their limit than maxUnavailablePartitions allows. A partition is over its limit while
// its unavailable targets and those still on older options exceed its maxUnavailable, so the
// next partition waits until this one has deployed and become ready.
func (r *rollout) partitionOpen(p *partition) bool {
	over := 0
	for _, q := range r.partitions {
		if q == p {
			return over <= r.maxUnavailablePartitions
		}
		if q.unavailable+q.outdated > q.maxUnavailable {
			over++
		}
	}
	return true
}

// status reports the partitions for the Bundle's status.
func (r *rollout) status(result []synced) ([]fleet.PartitionStatus, int) {
	var out []fleet.PartitionStatus
	over := 0
	for _, p := range r.partitions {
		ps := fleet.PartitionStatus{Name: p.name, Count: len(p.members), MaxUnavailable: p.maxUnavailable}
		for _, i := range p.members {
			s := result[i]
			if s.bd == nil || unavailable(s.bd) {
				ps.Unavailable++
			}
			if s.bd != nil {
				summary.Add(&ps.Summary, s.cluster.Namespace+"/"+s.cluster.Name, s.bd)
			} else {
				summary.Increment(&ps.Summary, fleet.Pending)
			}
		}
		if ps.Unavailable > ps.MaxUnavailable {
			over++
		}
		out = append(out, ps)
	}
	return out, over
}
