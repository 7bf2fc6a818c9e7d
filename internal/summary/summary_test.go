package summary

import (
	"strings"
	"testing"
	"time"

	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func bd(applied, id, staged string, ready, nonModified bool, conds ...genericcondition.GenericCondition) *fleet.BundleDeployment {
	b := &fleet.BundleDeployment{}
	b.Spec.DeploymentID, b.Spec.StagedDeploymentID = id, staged
	b.Status.AppliedDeploymentID, b.Status.Ready, b.Status.NonModified = applied, ready, nonModified
	b.Status.Conditions = conds
	return b
}

func TestState(t *testing.T) {
	failed := genericcondition.GenericCondition{Type: "Deployed", Status: corev1.ConditionFalse, Message: "boom"}
	tests := []struct {
		name string
		bd   *fleet.BundleDeployment
		want fleet.BundleState
	}{
		{"failed apply", bd("old", "new", "new", true, true, failed), fleet.ErrApplied},
		{"not applied yet", bd("old", "new", "new", true, true), fleet.WaitApplied},
		{"applied, not ready", bd("new", "new", "new", false, true), fleet.NotReady},
		{"staged not promoted", bd("new", "new", "newer", true, true), fleet.OutOfSync},
		{"drifted", bd("new", "new", "new", true, false), fleet.Modified},
		{"ready", bd("new", "new", "new", true, true), fleet.Ready},
		// Order matters: not ready wins over out of sync and modified.
		{"not ready and modified", bd("new", "new", "newer", false, false), fleet.NotReady},
	}
	for _, tt := range tests {
		if got := State(tt.bd); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestSummaryAndMessage(t *testing.T) {
	var s fleet.BundleSummary
	for i := 0; i < 12; i++ {
		Add(&s, "c-ready", bd("a", "a", "a", true, true))
	}
	for i := 0; i < 12; i++ {
		Add(&s, "c-wait", bd("", "a", "a", false, false))
	}
	Add(&s, "c-err", bd("", "a", "a", false, false, genericcondition.GenericCondition{Type: "Deployed", Status: corev1.ConditionFalse, Message: "chart invalid"}))
	if s.Ready != 12 || s.WaitApplied != 12 || s.ErrApplied != 1 || s.DesiredReady != 25 {
		t.Fatalf("counts %+v", s)
	}
	if len(s.NonReadyResources) != MaxNonReady {
		t.Fatalf("non-ready list must be bounded, got %d", len(s.NonReadyResources))
	}
	if WorstState(s) != fleet.ErrApplied {
		t.Errorf("worst %s", WorstState(s))
	}
	msg := ReadyMessage(s)
	if !strings.HasPrefix(msg, "ErrApplied(1), WaitApplied(12) [c-wait: WaitApplied") {
		t.Errorf("message %q", msg)
	}
	var all fleet.BundleSummary
	Increment(&all, fleet.Ready)
	if ReadyMessage(all) != "" || WorstState(all) != "" {
		t.Error("a ready summary has no message")
	}
}

func TestMessagesNameKindsWithTheirGroup(t *testing.T) {
	b := bd("a", "a", "a", false, false)
	b.Status.NonReadyStatus = []fleet.NonReadyStatus{{APIVersion: "batch/v1", Kind: "Job", Namespace: "default", Name: "migrate",
		Summary: fleet.Summary{Message: []string{"running"}}}}
	if got, want := Message(b, fleet.NotReady), "job.batch default/migrate running"; got != want {
		t.Errorf("not ready: %q, want %q", got, want)
	}
	b.Status.ModifiedStatus = []fleet.ModifiedStatus{
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "settings", Patch: `{"data":{"a":"1"}}`},
		{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "reader", Create: true},
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "web", Name: "old", Delete: true},
	}
	want := `configmap.v1 default/settings modified {"data":{"a":"1"}}, clusterrole.rbac.authorization.k8s.io reader missing, deployment.apps web/old extra`
	if got := Message(b, fleet.Modified); got != want {
		t.Errorf("modified: %q, want %q", got, want)
	}
}

func TestHeldRollsUpEachHeldBundleAndGoesWithTheLast(t *testing.T) {
	held := func(name string, st corev1.ConditionStatus, msg string) *fleet.Bundle {
		b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if msg != "" {
			fleet.SetCondition(&b.Status.Conditions, fleet.ConditionHeld, st, "r", msg, time.Time{})
		}
		return b
	}
	var conds []genericcondition.GenericCondition
	SetHeld(&conds, []*fleet.Bundle{held("a", corev1.ConditionTrue, "2 held"), held("b", "", ""), held("c", corev1.ConditionFalse, "not held")}, time.Time{})
	c := fleet.FindCondition(conds, fleet.ConditionHeld)
	if c == nil || c.Status != corev1.ConditionFalse || c.Message != "bundle a: 2 held; bundle c: not held" {
		t.Fatalf("held: %+v", c)
	}
	SetHeld(&conds, []*fleet.Bundle{held("a", "", "")}, time.Time{})
	if fleet.FindCondition(conds, fleet.ConditionHeld) != nil {
		t.Fatalf("released, still held: %+v", conds)
	}
}
