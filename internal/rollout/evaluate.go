package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Decision is what happens to one target's BundleDeployment in a pass.
type Decision uint8

const (
	// Hold keeps what the cluster has (the new options only staged).
	Hold Decision = iota
	// Promote gives the cluster the revision.
	Promote
	// RollBack returns the cluster to what it had before the revision.
	RollBack
)

// maxFailures bounds the failures a status lists.
const maxFailures = 10

// Input is what a pass decides from.
type Input struct {
	PolicyName string
	// Policy is nil when the named policy does not exist.
	Policy   *fleet.RolloutPolicySpec
	Spec     fleet.RolloutSpec
	Status   fleet.RolloutStatus
	Revision string
	// Current is what Revision deploys (Inputs), kept in the status so that a rollback of a
	// later revision can return to it.
	Current *fleet.RolloutRevision
	// Targets, in plan order, with their BundleDeployments (nil: none yet).
	Targets []target.ClusterInfo
	BDs     []*fleet.BundleDeployment
	Now     time.Time
	// Hold says Revision is a user's staged rollback of the clusters Targets holds (their
	// BundleHistory's hold): complete, it does not become the revision that passed, which stays
	// what the whole Bundle last passed.
	Hold bool
}

// Result is a pass's outcome.
type Result struct {
	Decisions []Decision
	// Gated marks the targets whose agents are to evaluate the policy's gates: those of stages
	// not complete yet.
	Gated  []bool
	Status fleet.RolloutStatus
	// Requeue is when the rollout needs another look though nothing changes (a soak or a
	// progress deadline ends); zero: none.
	Requeue time.Duration
	// Halted says the rollout halted in this pass.
	Halted bool
}

// pass is one evaluation.
type pass struct {
	in     Input
	res    Result
	st     *fleet.RolloutStatus
	stages []*stage
	states []standing
}

// Evaluate decides a pass of a rollout.
func Evaluate(in Input) Result {
	p := &pass{in: in, res: Result{Decisions: make([]Decision, len(in.Targets)), Gated: make([]bool, len(in.Targets)), Status: *in.Status.DeepCopy()}}
	p.st = &p.res.Status
	p.st.Policy = in.PolicyName
	p.newRevision()
	if in.Policy == nil {
		p.invalid(fmt.Sprintf("rolloutpolicy %s not found in this namespace", in.PolicyName))
		return p.res
	}
	if err := Validate(in.Policy); err != nil {
		p.invalid(fmt.Sprintf("rolloutpolicy %s: %v", in.PolicyName, err))
		return p.res
	}
	stages, err := assign(in.Policy, in.Targets)
	if err == nil && len(in.Targets) > 0 && !slices.ContainsFunc(stages, func(s *stage) bool { return s.spec.Name != Unstaged && len(s.members) > 0 }) {
		err = fmt.Errorf("stages: none selects any of the %d targeted clusters", len(in.Targets))
	}
	if err != nil {
		p.invalid(fmt.Sprintf("rolloutpolicy %s: %v", in.PolicyName, err))
		return p.res
	}
	p.stages = stages
	p.states = make([]standing, len(in.Targets))
	for i, bd := range in.BDs {
		p.states[i] = standingOf(bd, in.Revision, in.Policy.Gates, deadlineOf(in.Policy), in.Now)
	}
	p.userActions()
	switch p.st.Phase {
	case fleet.RolloutComplete:
		p.all(Promote)
	case fleet.RolloutRolledBack, fleet.RolloutAborted:
		p.rollBackUpdated()
	case fleet.RolloutHalted:
		p.all(Hold)
	default:
		p.progress()
	}
	p.stageStatus()
	return p.res
}

// newRevision starts the rollout of a revision not seen before: the last one counts as passed
// when its rollout completed.
func (p *pass) newRevision() {
	if p.st.Revision == p.in.Revision {
		if p.st.Current == nil {
			p.st.Current = p.in.Current.DeepCopy()
		}
		return
	}
	passed, kept := p.st.PassedRevision, p.st.Passed
	if p.st.Phase == fleet.RolloutComplete && !p.st.Hold {
		passed, kept = p.st.Revision, p.st.Current
	}
	now := metav1.NewTime(p.in.Now)
	*p.st = fleet.RolloutStatus{Policy: p.in.PolicyName, Revision: p.in.Revision, PassedRevision: passed, Hold: p.in.Hold,
		Phase: fleet.RolloutProgressing, StartedAt: &now, Retried: max(p.st.Retried, p.in.Spec.Retry),
		Current: p.in.Current.DeepCopy(), Passed: kept}
}

// invalid holds everything: a policy that cannot apply touches nothing deployed.
func (p *pass) invalid(msg string) {
	p.st.Phase, p.st.Message = fleet.RolloutInvalid, msg
	p.all(Hold)
}

// userActions applies a retry or an abort asked for in the spec.
func (p *pass) userActions() {
	st, spec := p.st, p.in.Spec
	if st.Phase == fleet.RolloutInvalid {
		st.Phase, st.Message = fleet.RolloutProgressing, ""
	}
	if spec.Retry > st.Retried {
		st.Retried = spec.Retry
		if st.Phase == fleet.RolloutHalted || st.Phase == fleet.RolloutRolledBack || st.Phase == fleet.RolloutAborted {
			now := metav1.NewTime(p.in.Now)
			st.Phase, st.Message, st.Failures, st.FinishedAt, st.StartedAt, st.RolledBack = fleet.RolloutProgressing, "", nil, nil, &now, 0
			st.Stages = nil
		}
	}
	if spec.Abort != "" && spec.Abort == st.Revision && st.Phase != fleet.RolloutComplete &&
		st.Phase != fleet.RolloutAborted && st.Phase != fleet.RolloutRolledBack {
		now := metav1.NewTime(p.in.Now)
		st.Phase, st.Message, st.FinishedAt = fleet.RolloutAborted, "aborted: updated clusters go back to the previous revision", &now
	}
}

func (p *pass) all(d Decision) {
	for i := range p.res.Decisions {
		p.res.Decisions[i] = d
	}
}

// rollBackUpdated returns every updated target to what it had.
func (p *pass) rollBackUpdated() {
	n := 0
	for i, s := range p.states {
		if s.updated {
			p.res.Decisions[i] = RollBack
			n++
		}
	}
	p.st.RolledBack = max(p.st.RolledBack, n)
}

// stageState returns the status kept for a stage (adding one when there is none).
func (p *pass) stageState(name string) *fleet.RolloutStageStatus {
	for i := range p.st.Stages {
		if p.st.Stages[i].Name == name {
			return &p.st.Stages[i]
		}
	}
	p.st.Stages = append(p.st.Stages, fleet.RolloutStageStatus{Name: name, State: "Pending"})
	return &p.st.Stages[len(p.st.Stages)-1]
}

// stageStatus writes every stage's counts, in the policy's order.
func (p *pass) stageStatus() {
	if p.stages == nil {
		return
	}
	out := make([]fleet.RolloutStageStatus, 0, len(p.stages))
	for _, s := range p.stages {
		ss := *p.stageState(s.spec.Name)
		ss.Clusters, ss.Updated, ss.Passing, ss.Failed, ss.Message = len(s.members), 0, 0, 0, s.message
		for _, i := range s.members {
			st := p.states[i]
			ss.Updated += b2i(st.updated)
			ss.Passing += b2i(st.passing)
			ss.Failed += b2i(st.failed)
		}
		out = append(out, ss)
	}
	p.st.Stages = out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// concurrency is how many targets of a stage may be updating at once.
func concurrency(s *stage) int {
	if s.spec.MaxConcurrency == nil {
		return len(s.members)
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(s.spec.MaxConcurrency, len(s.members), true)
	if err != nil {
		return len(s.members)
	}
	return max(n, 1)
}

// describe is a failure's one line.
func describe(f fleet.RolloutFailure) string {
	return fmt.Sprintf("cluster %s failed gate %s: %s", f.Cluster, f.Gate, strings.TrimSpace(f.Reason))
}
