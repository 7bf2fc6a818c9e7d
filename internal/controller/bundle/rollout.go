package bundle

import (
	"github.com/fleetgo/fleet/internal/rollout"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// decider is a pass's rollout: one strategy decides about every target (the stages of the
// RolloutPolicy the Bundle names, else Fleet's partitions), and the partitions' figures fill
// Fleet's status fields either way.
type decider struct {
	strategy   rollout.Strategy
	partitions *rollout.Partitions
	// progressive is the RolloutPolicy's rollout (progressive.go); nil without one.
	progressive *progressive
	// targets are the plan indexes of the targets (planned with a namespace), in target
	// order; target maps a plan index back to its target index.
	targets []int
	target  map[int]int
	infos   []target.ClusterInfo
	// created is how many BundleDeployments the pass created (status.newlyCreated).
	created int
	// revision is the Bundle's revision this pass (rollout.Revision): what a promoted
	// deployment is stamped with (fleet.RevisionAnnotation), for the deployment history.
	revision string
	// holds are the users' rollbacks in force (holds.go): they decide about the clusters they
	// hold, before the strategy.
	holds  *holds
	h      *handler
	bundle *fleet.Bundle
}

// newDecider counts the plan's targets and makes the strategy that decides about them.
func (h *handler) newDecider(b *fleet.Bundle, plan []planned, existing map[string]*fleet.BundleDeployment, contentName string) (*decider, error) {
	d := &decider{target: map[int]int{}, revision: rollout.Revision(b, contentName), h: h, bundle: b}
	var err error
	if d.holds, err = h.holdsOf(b); err != nil {
		return nil, err
	}
	var bds []*fleet.BundleDeployment
	for i, p := range plan {
		if p.namespace == "" {
			continue
		}
		d.target[i] = len(d.targets)
		d.targets = append(d.targets, i)
		d.infos = append(d.infos, p.info)
		bds = append(bds, existing[p.namespace])
	}
	parts, err := rollout.NewPartitions(b.Spec.RolloutStrategy, b.Spec.Paused, d.infos, bds)
	if err != nil {
		return nil, err
	}
	d.partitions, d.strategy = parts, parts
	if d.progressive, err = h.progressiveOf(b, d.infos, bds, contentName); err != nil {
		return nil, err
	}
	if d.progressive != nil {
		d.strategy = &rollout.Staged{Result: d.progressive.result}
	}
	d.stageHold(bds)
	return d, nil
}

// order is the plan indexes of the targets, in the order the strategy decides them.
func (d *decider) order() []int {
	out := make([]int, 0, len(d.targets))
	for _, k := range d.strategy.Order() {
		out = append(out, d.targets[k])
	}
	return out
}

// mustWrite says plan index i's deployment needs writing though its inputs did not change: a
// rollout promotes, rolls back or re-gates it.
func (d *decider) mustWrite(i int, cur *fleet.BundleDeployment) bool {
	k := d.target[i]
	if d.progressive != nil && d.progressive.staged != nil && d.holds.of(d.infos[k].Cluster) == d.progressive.staged {
		return d.progressive.mustWrite(k, cur) // its rollout promotes it
	}
	return d.holds.mustWrite(d.infos[k].Cluster, cur) || d.progressive != nil && d.progressive.mustWrite(k, cur)
}

// next is the BundleDeployment to write for plan index i, as the strategy decides: desired,
// what cur has (desired only staged), or what cur had before the revision rolling out.
func (d *decider) next(i int, desired, cur *fleet.BundleDeployment) *fleet.BundleDeployment {
	k := d.target[i]
	if one := d.holds.of(d.infos[k].Cluster); one != nil && d.progressive != nil && d.progressive.staged == one {
		return d.stagedNext(k, one, desired, cur)
	} else if one != nil {
		if next := one.render(d.h, d.bundle, d.infos[k], desired, cur); next != nil {
			return d.marked(k, next, one.hold.Revision)
		}
	}
	var next *fleet.BundleDeployment
	revision := ""
	if cur != nil {
		revision = cur.Annotations[fleet.RevisionAnnotation]
	}
	switch d.strategy.Decide(k, cur, desired.Spec.DeploymentID) {
	case rollout.Promote:
		next, revision = desired.DeepCopy(), d.revision
		if d.progressive != nil {
			next = d.progressive.promote(desired, cur)
		}
	case rollout.RollBack:
		next = d.progressive.rollBack(d.infos[k], desired, cur)
		if next != nil {
			revision = next.Annotations[fleet.RolloutRevisionAnnotation]
		}
	}
	if next == nil {
		next = hold(desired, cur)
	}
	return d.marked(k, next, revision)
}

// marked is next stamped with the revision it deploys, and with the marks of the Bundle's
// rollout policy (none without one).
func (d *decider) marked(k int, next *fleet.BundleDeployment, revision string) *fleet.BundleDeployment {
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	setOrDelete(next.Annotations, fleet.RevisionAnnotation, revision)
	// The label of earlier versions' rollback snapshots goes with the next write.
	delete(next.Labels, fleet.RolloutPreviousContentLabel)
	if d.progressive == nil {
		// A Bundle without a policy carries none of a policy's marks.
		for _, a := range ownedAnnotations {
			delete(next.Annotations, a)
		}
		return next
	}
	setOrDelete(next.Annotations, fleet.RolloutGatesAnnotation, d.progressive.gatesFor(k))
	return next
}

// status reports the partitions for the Bundle's status from the pass's result.
func (d *decider) status(result []synced) ([]fleet.PartitionStatus, int) {
	bds := make([]*fleet.BundleDeployment, len(d.targets))
	for k, i := range d.targets {
		bds[k] = result[i].bd
	}
	return d.partitions.Status(d.infos, bds)
}
