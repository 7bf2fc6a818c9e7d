package sim

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestSimulatedReportsAHealthyDeploy(t *testing.T) {
	now := time.Now()
	bd := bdWith("s-1:abc", func(bd *fleet.BundleDeployment) {
		bd.Name = "web"
		bd.Spec.Options.DefaultNamespace = "apps"
	})
	status := simulated(bd, fleet.BundleDeploymentStatus{}, 1, 3, "", now)
	if status.AppliedDeploymentID != "s-1:abc" || status.Release != "apps/web:1" {
		t.Fatalf("applied %q release %q", status.AppliedDeploymentID, status.Release)
	}
	if !status.Ready || !status.NonModified || status.ResourceCounts == nil || status.ResourceCounts.Ready != 3 || status.ResourceCounts.DesiredReady != 3 {
		t.Fatalf("ready %v nonModified %v counts %+v", status.Ready, status.NonModified, status.ResourceCounts)
	}
	if status.Display.State != string(fleet.Ready) {
		t.Fatalf("state %q", status.Display.State)
	}
	if c := fleet.FindCondition(status.Conditions, fleet.ConditionReady); c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("Ready condition %+v", c)
	}
}

func bdWith(id string, mutate func(*fleet.BundleDeployment)) *fleet.BundleDeployment {
	bd := &fleet.BundleDeployment{Spec: fleet.BundleDeploymentSpec{DeploymentID: id, StagedDeploymentID: id}}
	if mutate != nil {
		mutate(bd)
	}
	return bd
}

func TestSimulatedHoldsAndLeavesDeletedAlone(t *testing.T) {
	now := time.Now()
	paused := bdWith("s-2:def", func(bd *fleet.BundleDeployment) { bd.Spec.Paused = true })
	status := simulated(paused, fleet.BundleDeploymentStatus{AppliedDeploymentID: "s-1:abc", Ready: true, NonModified: true}, 2, 3, "", now)
	if status.AppliedDeploymentID != "s-1:abc" {
		t.Fatalf("a paused deployment was applied: %q", status.AppliedDeploymentID)
	}
	if status.Display.State == string(fleet.Ready) {
		t.Fatalf("a paused deployment behind its spec reported Ready")
	}
	gone := bdWith("s-1:abc", func(bd *fleet.BundleDeployment) { bd.DeletionTimestamp = &metav1.Time{Time: now} })
	if s := simulated(gone, fleet.BundleDeploymentStatus{}, 1, 3, "", now); s.AppliedDeploymentID != "" || s.Display.State != "" {
		t.Fatalf("a deleted deployment got status %+v", s)
	}
}

func TestSimulatedGates(t *testing.T) {
	now := time.Now()
	bd := bdWith("s-1:abc", func(bd *fleet.BundleDeployment) {
		bd.Annotations = map[string]string{fleet.RolloutGatesAnnotation: `[{"name":"web","httpGet":{"url":"http://web/"}}]`}
	})
	if !gatesPending(bd) {
		t.Fatal("a gate without a result is pending")
	}
	pass := simulated(bd, fleet.BundleDeploymentStatus{}, 1, 3, "", now)
	if c := fleet.FindCondition(pass.Conditions, fleet.GateCondition("web")); c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("passing gate: %+v", c)
	}
	fail := simulated(bd, fleet.BundleDeploymentStatus{}, 1, 3, "chosen to fail", now)
	if c := fleet.FindCondition(fail.Conditions, fleet.GateCondition("web")); c == nil || c.Status != corev1.ConditionFalse || c.Message != "chosen to fail" {
		t.Fatalf("failing gate: %+v", c)
	}
	bd.Status = fail
	if gatesPending(bd) {
		t.Fatal("a failed gate is reported, not pending")
	}
}
