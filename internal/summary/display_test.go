package summary

import (
	"testing"

	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	corev1 "k8s.io/api/core/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestSourceState(t *testing.T) {
	cond := func(typ string, status corev1.ConditionStatus) genericcondition.GenericCondition {
		return genericcondition.GenericCondition{Type: typ, Status: status, Message: typ + " says so"}
	}
	for _, c := range []struct {
		name      string
		conds     []genericcondition.GenericCondition
		display   string
		want      string
		wantIssue string
	}{
		{"refused wins over its display state", []genericcondition.GenericCondition{cond("Accepted", corev1.ConditionFalse), cond("Ready", corev1.ConditionFalse)},
			"Ready", "Refused", "Accepted says so"},
		{"stalled", []genericcondition.GenericCondition{cond("Stalled", corev1.ConditionTrue)}, "", "Stalled", "Stalled says so"},
		{"display state", []genericcondition.GenericCondition{cond("Ready", corev1.ConditionFalse)}, "Modified", "Modified", "Ready says so"},
		{"ready without display state", []genericcondition.GenericCondition{cond("Ready", corev1.ConditionTrue)}, "", "Ready", ""},
		{"nothing known", nil, "", "NotReady", ""},
	} {
		if got := SourceState(c.conds, c.display); got != c.want {
			t.Errorf("%s: state %q, want %q", c.name, got, c.want)
		}
		if got := SourceProblem(c.conds); got != c.wantIssue {
			t.Errorf("%s: problem %q, want %q", c.name, got, c.wantIssue)
		}
	}
	gr := &fleet.GitRepo{}
	gr.Status.Conditions = []genericcondition.GenericCondition{cond("Accepted", corev1.ConditionFalse)}
	op := &fleet.HelmOp{}
	op.Status.Conditions = gr.Status.Conditions
	if GitRepoState(gr) != "Refused" || HelmOpState(op) != "Refused" {
		t.Error("GitRepos and HelmOps follow the same rule")
	}
}
