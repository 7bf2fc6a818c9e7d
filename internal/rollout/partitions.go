package rollout

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetgo/fleet/internal/summary"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Fleet's rollout strategy (a Bundle's spec.rolloutStrategy): its targets in partitions,
// promoted partition by partition while few enough are unavailable. Its figures are also what
// Fleet's status fields report for every Bundle, whichever strategy decides.

// Defaults of a rollout strategy, as Fleet documents them.
const (
	defaultAutoPartitionThreshold = 200
	defaultAutoPartitionSize      = "25%"
)

// partition is a group of targets promoted together.
type partition struct {
	name           string
	maxUnavailable int
	members        []int // target indexes
	unavailable    int
	// outdated counts members left on older options in this pass.
	outdated int
}

// Partitions decides, target by target, whether staged options may be promoted: never while
// the Bundle is paused; otherwise partition by partition, while the unavailable targets stay
// within the partition's and the Bundle's maxUnavailable, and stopping at the first partitions
// that are too unavailable once more than maxUnavailablePartitions are.
type Partitions struct {
	paused bool
	// MaxUnavailable and MaxUnavailablePartitions are the strategy's limits, scaled.
	MaxUnavailable           int
	MaxUnavailablePartitions int
	unavailable              int
	partitions               []*partition
	// of is each target's partition.
	of []*partition
}

// Unavailable says a BundleDeployment is not (yet) deployed as its spec asks and ready, by
// Fleet's rule (the IDs compared alone, as summary.State does): a deployment held back with no
// deploymentID does not count against maxUnavailable, or a held rollout could never go on.
func Unavailable(bd *fleet.BundleDeployment) bool {
	return bd.Status.AppliedDeploymentID != bd.Spec.DeploymentID || !bd.Status.Ready
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

// CheckStrategy refuses a rollout strategy whose limits are neither a number nor a percentage:
// taken as "no limit" they would let every cluster go unavailable at once (fail open).
func CheckStrategy(rs *fleet.RolloutStrategy) error {
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

// NewPartitions splits the targets into partitions and counts what is unavailable now; bds are
// the targets' BundleDeployments (nil: none yet).
func NewPartitions(rs *fleet.RolloutStrategy, paused bool, targets []target.ClusterInfo, bds []*fleet.BundleDeployment) (*Partitions, error) {
	if rs == nil {
		rs = &fleet.RolloutStrategy{}
	}
	if err := CheckStrategy(rs); err != nil {
		return nil, err
	}
	r := &Partitions{paused: paused, of: make([]*partition, len(targets))}
	r.MaxUnavailable = max(scaled(rs.MaxUnavailable, len(targets), intstr.FromString("100%")), 1)
	if len(rs.Partitions) > 0 {
		if err := r.partitionAsDeclared(rs, targets); err != nil {
			return nil, err
		}
	} else {
		r.partitionAutomatically(rs, len(targets))
	}
	// A percentage is of the partitions, so it is scaled once they are known.
	r.MaxUnavailablePartitions = scaled(rs.MaxUnavailablePartitions, len(r.partitions), intstr.FromInt32(0))
	for _, part := range r.partitions {
		for _, k := range part.members {
			r.of[k] = part
			if cur := bds[k]; cur == nil || Unavailable(cur) {
				part.unavailable++
				r.unavailable++
			}
		}
	}
	return r, nil
}

// partitionAsDeclared puts each target into the first partition of the strategy whose
// selectors match it; the rest make a last partition, "unpartitioned".
func (r *Partitions) partitionAsDeclared(rs *fleet.RolloutStrategy, targets []target.ClusterInfo) error {
	rest := &partition{name: "unpartitioned", maxUnavailable: r.MaxUnavailable}
	for _, p := range rs.Partitions {
		r.partitions = append(r.partitions, &partition{name: p.Name})
	}
	for k, info := range targets {
		idx, err := target.PartitionIndex(rs.Partitions, info)
		if err != nil {
			return err
		}
		if idx < 0 {
			rest.members = append(rest.members, k)
			continue
		}
		r.partitions[idx].members = append(r.partitions[idx].members, k)
	}
	for k, p := range rs.Partitions {
		part := r.partitions[k]
		part.maxUnavailable = scaled(p.MaxUnavailable, len(part.members), intstr.FromInt32(int32(r.MaxUnavailable)))
		if p.MaxUnavailable == nil {
			part.maxUnavailable = r.MaxUnavailable
		}
	}
	if len(rest.members) > 0 {
		r.partitions = append(r.partitions, rest)
	}
	return nil
}

// partitionAutomatically cuts the n targets into partitions of autoPartitionSize once there
// are autoPartitionThreshold of them, else keeps them in one ("All").
func (r *Partitions) partitionAutomatically(rs *fleet.RolloutStrategy, n int) {
	threshold := defaultAutoPartitionThreshold
	if rs.AutoPartitionThreshold != nil {
		threshold = *rs.AutoPartitionThreshold
	}
	size := n
	if n >= threshold {
		size = max(scaled(rs.AutoPartitionSize, n, intstr.FromString(defaultAutoPartitionSize)), 1)
	}
	size = max(size, 1)
	for start := 0; start < n; start += size {
		end := min(start+size, n)
		name := "All"
		if size < n {
			name = fmt.Sprintf("Partition %d", start/size)
		}
		members := make([]int, 0, end-start)
		for k := start; k < end; k++ {
			members = append(members, k)
		}
		r.partitions = append(r.partitions, &partition{name: name, maxUnavailable: r.MaxUnavailable, members: members})
	}
}

// Order is the targets in partition order: the order Decide is asked in, as each decision
// spends what the ones before left of the limits.
func (r *Partitions) Order() []int {
	var out []int
	for _, p := range r.partitions {
		out = append(out, p.members...)
	}
	return out
}

// Decide says whether target k's deployment (cur, nil when there is none) gets deploymentID,
// the desired options: always when it has them already, otherwise when the Bundle is not
// paused, its partition is open and promoting it keeps the unavailable targets within limits.
func (r *Partitions) Decide(k int, cur *fleet.BundleDeployment, deploymentID string) Decision {
	if cur != nil && cur.Spec.DeploymentID == deploymentID {
		return Promote
	}
	p := r.of[k]
	promote := !r.paused && r.partitionOpen(p)
	wasAvailable := cur != nil && !Unavailable(cur)
	// Promoting an available target makes it unavailable until the agent has deployed it; a
	// target that is unavailable anyway costs nothing more.
	// A partition may always take one target, so a limit of 0 still lets a canary through.
	if promote && wasAvailable && (r.unavailable >= r.MaxUnavailable || p.unavailable >= max(p.maxUnavailable, 1)) {
		promote = false
	}
	if !promote {
		p.outdated++
		return Hold
	}
	if wasAvailable {
		r.unavailable++
		p.unavailable++
	}
	return Promote
}

// partitionOpen reports whether targets of p may be promoted: no more partitions before it are
// over their limit than maxUnavailablePartitions allows. A partition is over its limit while
// its unavailable targets and those still on older options exceed its maxUnavailable, so the
// next partition waits until this one has deployed and become ready.
func (r *Partitions) partitionOpen(p *partition) bool {
	over := 0
	for _, q := range r.partitions {
		if q == p {
			return over <= r.MaxUnavailablePartitions
		}
		if q.unavailable+q.outdated > q.maxUnavailable {
			over++
		}
	}
	return true
}

// Status reports the partitions for the Bundle's status (Fleet's partitions and
// unavailablePartitions) from the targets' deployments as written (nil: none yet).
func (r *Partitions) Status(targets []target.ClusterInfo, bds []*fleet.BundleDeployment) ([]fleet.PartitionStatus, int) {
	var out []fleet.PartitionStatus
	over := 0
	for _, p := range r.partitions {
		ps := fleet.PartitionStatus{Name: p.name, Count: len(p.members), MaxUnavailable: p.maxUnavailable}
		for _, k := range p.members {
			bd := bds[k]
			if bd == nil || Unavailable(bd) {
				ps.Unavailable++
			}
			if bd != nil {
				c := targets[k].Cluster
				summary.Add(&ps.Summary, c.Namespace+"/"+c.Name, bd)
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
