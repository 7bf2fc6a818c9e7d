package v1alpha1

import (
	"testing"
	"time"

	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	corev1 "k8s.io/api/core/v1"
)

func TestSetCondition(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	t2 := t1.Add(time.Minute)
	var conds []genericcondition.GenericCondition

	if !SetCondition(&conds, ConditionReady, corev1.ConditionFalse, "NotReady", "waiting", t0) {
		t.Fatal("adding a condition is a change")
	}
	if SetCondition(&conds, ConditionReady, corev1.ConditionFalse, "NotReady", "waiting", t1) {
		t.Fatal("setting the same values is no change")
	}
	if conds[0].LastUpdateTime != t0.Format(time.RFC3339) {
		t.Fatalf("an unchanged condition keeps its timestamps, got %s", conds[0].LastUpdateTime)
	}
	if !SetCondition(&conds, ConditionReady, corev1.ConditionFalse, "NotReady", "still waiting", t1) {
		t.Fatal("a new message is a change")
	}
	if conds[0].LastTransitionTime != t0.Format(time.RFC3339) || conds[0].LastUpdateTime != t1.Format(time.RFC3339) {
		t.Fatalf("message change moves only lastUpdateTime: %+v", conds[0])
	}
	SetCondition(&conds, ConditionReady, corev1.ConditionTrue, "", "", t2)
	if conds[0].LastTransitionTime != t2.Format(time.RFC3339) {
		t.Fatalf("status change moves lastTransitionTime: %+v", conds[0])
	}
	SetCondition(&conds, ConditionDeployed, corev1.ConditionTrue, "", "", t2)
	if len(conds) != 2 || FindCondition(conds, ConditionDeployed) == nil || FindCondition(conds, ConditionMonitored) != nil {
		t.Fatalf("conditions by type: %+v", conds)
	}
}

func TestStateRankOrdersEveryState(t *testing.T) {
	order := []BundleState{Ready, NotReady, Pending, OutOfSync, Modified, WaitApplied, ErrApplied}
	if len(StateRank) != len(order) {
		t.Fatalf("StateRank has %d states, want %d", len(StateRank), len(order))
	}
	for i := 1; i < len(order); i++ {
		if StateRank[order[i-1]] >= StateRank[order[i]] {
			t.Errorf("%s must rank below %s", order[i-1], order[i])
		}
	}
}

func TestGenericMapRoundTripAndDeepCopy(t *testing.T) {
	var m GenericMap
	if err := m.UnmarshalJSON([]byte(`{"a":{"b":[1,"x",true]},"n":null}`)); err != nil {
		t.Fatal(err)
	}
	cp := m.DeepCopy()
	cp.Data["a"].(map[string]any)["b"] = "changed"
	if _, ok := m.Data["a"].(map[string]any)["b"].([]any); !ok {
		t.Fatal("DeepCopy shares nested maps with the original")
	}
	out, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"a":{"b":[1,"x",true]},"n":null}` {
		t.Fatalf("round trip = %s", out)
	}
}
