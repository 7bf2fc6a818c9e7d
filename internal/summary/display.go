package summary

import (
	"github.com/rancher/wrangler/v3/pkg/condition"
	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	corev1 "k8s.io/api/core/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// The rules below are what every surface shows (`fleet status`, the web UI): one state and one
// first problem per object, so two of them never tell a user different things.

// SourceState is the state of a GitRepo or HelmOp: Refused when not Accepted, Stalled when
// Stalled, else its display state, else Ready or NotReady by its Ready condition.
func SourceState(conds []genericcondition.GenericCondition, display string) string {
	if c := fleet.FindCondition(conds, fleet.ConditionAccepted); c != nil && c.Status == corev1.ConditionFalse {
		return "Refused"
	}
	if c := fleet.FindCondition(conds, fleet.ConditionStalled); c != nil && c.Status == corev1.ConditionTrue {
		return "Stalled"
	}
	if display != "" {
		return display
	}
	if c := fleet.FindCondition(conds, fleet.ConditionReady); c != nil && c.Status == corev1.ConditionTrue {
		return string(fleet.Ready)
	}
	return string(fleet.NotReady)
}

// GitRepoState is gr's SourceState.
func GitRepoState(gr *fleet.GitRepo) string {
	return SourceState(gr.Status.Conditions, gr.Status.Display.State)
}

// HelmOpState is op's SourceState.
func HelmOpState(op *fleet.HelmOp) string {
	return SourceState(op.Status.Conditions, op.Status.Display.State)
}

// SourceProblem is the first thing a GitRepo's or HelmOp's conditions say is wrong ("" when
// nothing is): refused, stalled, polling failing, not ready, in that order.
func SourceProblem(conds []genericcondition.GenericCondition) string {
	return Problem(conds, fleet.ConditionAccepted, fleet.ConditionStalled, fleet.ConditionGitPolling, fleet.ConditionReady)
}

// BundleState is the state of a Bundle: its display state, else the worst of its summary, else
// Ready.
func BundleState(b *fleet.Bundle) string {
	if s := b.Status.Display.State; s != "" {
		return s
	}
	if st := WorstState(b.Status.Summary); st != "" {
		return string(st)
	}
	return string(fleet.Ready)
}

// Problem is the message of the first condition of types that says something is wrong (Stalled
// when True, the others when False), "" when none does.
func Problem(conds []genericcondition.GenericCondition, types ...condition.Cond) string {
	for _, t := range types {
		c := fleet.FindCondition(conds, t)
		if c == nil || c.Message == "" {
			continue
		}
		if bad := c.Status == corev1.ConditionFalse; bad != (t == fleet.ConditionStalled) {
			return c.Message
		}
	}
	return ""
}
