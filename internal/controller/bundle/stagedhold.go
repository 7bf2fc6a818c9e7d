package bundle

import (
	"time"

	"github.com/fleetgo/fleet/internal/rollout"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A staged hold (`fleet rollback` of a Bundle that rolls out by a RolloutPolicy, without --now)
// goes through the policy: the revision it returns to rolls out over the clusters it holds, stage
// by stage, with the policy's gates, soaks and approvals, as the one rollout decider
// (rollout.Evaluate) rolls out any revision; the Rollout's status shows it (status.hold). Every
// other cluster keeps what it runs meanwhile. A gate that fails rolls the held clusters of its
// stage back to the revision the Bundle last passed. Complete, the rollback does not become the
// revision that passed: the Bundle's next revision rolls out from, and back to, what the whole
// Bundle ran.

// stageHold makes the pass's rollout the staged hold's, when one is in force and its revision
// can be deployed; bds are the targets' deployments (nil: none yet).
func (d *decider) stageHold(bds []*fleet.BundleDeployment) {
	pg := d.progressive
	if pg == nil || d.holds == nil || d.holds.staged == nil || !d.holds.staged.make(d.h, d.bundle) {
		return
	}
	one := d.holds.staged
	in := pg.in
	in.Targets, in.BDs = nil, nil
	var chosen []int
	for k, info := range d.infos {
		if d.holds.of(info.Cluster) == one {
			chosen = append(chosen, k)
			in.Targets, in.BDs = append(in.Targets, info), append(in.BDs, bds[k])
		}
	}
	in.Revision, in.Current, in.Hold = one.hold.Revision, one.inputs, true
	res := rollout.Evaluate(in)
	merged := rollout.Result{Decisions: make([]rollout.Decision, len(d.infos)), Gated: make([]bool, len(d.infos)),
		Status: res.Status, Requeue: res.Requeue, Halted: res.Halted}
	for j, k := range chosen {
		merged.Decisions[k], merged.Gated[k] = res.Decisions[j], res.Gated[j]
	}
	pg.result, pg.revision, pg.staged = merged, one.hold.Revision, one
	d.strategy = &rollout.Staged{Result: merged}
}

// stagedNext is the deployment of target k, held by the staged hold, as its rollout decides:
// the held revision once its stage promotes it, else what it runs (or, rolled back, the revision
// that passed).
func (d *decider) stagedNext(k int, one *held, desired, cur *fleet.BundleDeployment) *fleet.BundleDeployment {
	pg := d.progressive
	switch d.strategy.Decide(k, cur, desired.Spec.DeploymentID) {
	case rollout.Promote:
		next := one.render(d.h, d.bundle, d.infos[k], desired, cur)
		if next == nil {
			break
		}
		if cur == nil || cur.Annotations[fleet.RolloutRevisionAnnotation] != pg.revision {
			next.Annotations[fleet.RolloutRevisionAnnotation] = pg.revision
			next.Annotations[fleet.RolloutPromotedAnnotation] = pg.now.UTC().Format(time.RFC3339)
		}
		return d.marked(k, next, one.hold.Revision)
	case rollout.RollBack:
		if next := pg.rollBack(d.infos[k], desired, cur); next != nil {
			return d.marked(k, next, next.Annotations[fleet.RolloutRevisionAnnotation])
		}
	}
	revision := ""
	if cur != nil {
		revision = cur.Annotations[fleet.RevisionAnnotation]
	}
	return d.marked(k, hold(desired, cur), revision)
}
