package rollout

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Stage states.
const (
	StagePending     = "Pending"
	StageProgressing = "Progressing"
	StageSoaking     = "Soaking"
	StageWaiting     = "WaitingForApproval"
	StageComplete    = "Complete"
	StageFailed      = "Failed"
)

// progress walks the stages in order: complete ones keep the revision (and give it to clusters
// that joined them since), the first incomplete one promotes, soaks or halts, later ones hold.
func (p *pass) progress() {
	for _, s := range p.stages {
		ss := p.stageState(s.spec.Name)
		if ss.State != StageComplete {
			p.st.Stage = s.spec.Name
			if !p.runStage(s, ss) {
				return
			}
			ss.State = StageComplete
		}
		for _, i := range s.members {
			p.res.Decisions[i], p.res.Gated[i] = Promote, false
		}
	}
	now := metav1.NewTime(p.in.Now)
	p.st.Phase, p.st.Stage, p.st.Failures, p.st.FinishedAt = fleet.RolloutComplete, "", nil, &now
	p.st.Message = fmt.Sprintf("all %d clusters passed every stage", len(p.in.Targets))
}

// runStage moves the stage in progress on, and reports whether it is complete (soaked).
func (p *pass) runStage(s *stage, ss *fleet.RolloutStageStatus) bool {
	failed := p.failures(s, ss.SoakStartedAt != nil)
	p.st.Failures = failed[:min(len(failed), maxFailures)]
	if len(failed) > s.spec.FailureBudget {
		p.halt(s, ss, failed)
		return false
	}
	if s.spec.RequireApproval && !slices.Contains(p.in.Spec.Approved, p.st.Revision+"/"+s.spec.Name) {
		ss.State, p.st.Phase = StageWaiting, fleet.RolloutWaitingForApproval
		p.st.Message = fmt.Sprintf("stage %s waits for approval (fleet rollout approve)", s.spec.Name)
		return false
	}
	if len(s.members) == 0 {
		return true // nothing to soak
	}
	if !p.promote(s) {
		ss.SoakStartedAt, ss.State = nil, StageProgressing
		return false
	}
	if ss.SoakStartedAt == nil {
		t := metav1.NewTime(p.in.Now)
		ss.SoakStartedAt = &t
	}
	if left := soakOf(s.spec) - p.in.Now.Sub(ss.SoakStartedAt.Time); left > 0 {
		ss.State, p.st.Phase = StageSoaking, fleet.RolloutSoaking
		p.st.Message = fmt.Sprintf("stage %s: all %d clusters passing, soaking for %s more", s.spec.Name, len(s.members), left.Round(time.Second))
		p.requeueIn(left)
		return false
	}
	return true
}

// failures are the stage's failed targets; while soaking, a target that stopped passing fails.
func (p *pass) failures(s *stage, soaking bool) []fleet.RolloutFailure {
	var out []fleet.RolloutFailure
	for _, i := range s.members {
		st := &p.states[i]
		if soaking && st.updated && !st.passing && !st.failed {
			st.failed, st.reason = true, "stopped passing during the soak: "+st.reason
		}
		if st.failed {
			out = append(out, fleet.RolloutFailure{Cluster: p.in.Targets[i].Cluster.Name, Stage: s.spec.Name, Gate: st.gate, Reason: st.reason})
		}
	}
	return out
}

// promote promotes the stage's targets within its concurrency (unless paused) and reports
// whether every one has passed or failed.
func (p *pass) promote(s *stage) bool {
	limit, inFlight := concurrency(s), 0
	for _, i := range s.members {
		if st := p.states[i]; st.updated && !st.passing && !st.failed {
			inFlight++
		}
	}
	done, held := true, 0
	for _, i := range s.members {
		st := p.states[i]
		p.res.Gated[i] = true
		switch {
		case st.updated:
			p.res.Decisions[i] = Promote
			if !st.passing && !st.failed {
				done = false
				if !st.deadline.IsZero() {
					p.requeueIn(st.deadline.Sub(p.in.Now) + time.Second)
				}
			}
		case !p.in.Spec.Paused && inFlight < limit:
			p.res.Decisions[i] = Promote
			inFlight++
			done = false
		default:
			held++
			done = false
		}
	}
	if !done {
		p.st.Phase = fleet.RolloutProgressing
		p.st.Message = fmt.Sprintf("stage %s: %d of %d clusters updated", s.spec.Name, len(s.members)-held, len(s.members))
		if p.in.Spec.Paused && held > 0 {
			p.st.Phase = fleet.RolloutPaused
			p.st.Message = fmt.Sprintf("paused in stage %s: %d clusters wait", s.spec.Name, held)
		}
	}
	return done
}

// halt stops the rollout at a stage that failed more clusters than its budget: every updated
// cluster goes back, or with onFailure Pause all stays as it is.
func (p *pass) halt(s *stage, ss *fleet.RolloutStageStatus, failed []fleet.RolloutFailure) {
	now := metav1.NewTime(p.in.Now)
	p.st.FinishedAt, ss.State, p.res.Halted = &now, StageFailed, true
	msg := fmt.Sprintf("halted in stage %s: %d of %d clusters failed (budget %d); %s", s.spec.Name, len(failed), len(s.members), s.spec.FailureBudget, describe(failed[0]))
	if p.in.Policy.OnFailure == fleet.OnFailurePause {
		p.st.Phase, p.st.Message = fleet.RolloutHalted, msg+"; nothing rolled back (onFailure: Pause)"
		p.all(Hold)
		return
	}
	p.st.Phase, p.st.Message = fleet.RolloutRolledBack, msg+"; updated clusters go back to the previous revision"
	p.rollBackUpdated()
}

// requeueIn asks for a pass after d at the latest.
func (p *pass) requeueIn(d time.Duration) {
	if d <= 0 {
		d = time.Second
	}
	if p.res.Requeue == 0 || d < p.res.Requeue {
		p.res.Requeue = d
	}
}
