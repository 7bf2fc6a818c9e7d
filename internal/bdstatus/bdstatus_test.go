package bdstatus

import (
	"errors"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetgo/fleet/internal/helmdeployer"
	"github.com/fleetgo/fleet/internal/helmrelease"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func bdWith(id string, mutate func(*fleet.BundleDeployment)) *fleet.BundleDeployment {
	bd := &fleet.BundleDeployment{Spec: fleet.BundleDeploymentSpec{DeploymentID: id, StagedDeploymentID: id}}
	if mutate != nil {
		mutate(bd)
	}
	return bd
}

func TestDecide(t *testing.T) {
	current := &helmdeployer.Release{Name: "app", Namespace: "default", Version: 3, DeploymentID: "c:1", ValuesHash: "v1",
		Status: release.StatusDeployed}
	fleetMade := &helmdeployer.Release{Name: "app", Namespace: "default", Version: 1, Status: release.StatusDeployed, MadeByFleet: true}
	for _, tc := range []struct {
		name       string
		bd         *fleet.BundleDeployment
		rel        *helmdeployer.Release
		status     fleet.BundleDeploymentStatus
		valuesHash string
		want       Action
	}{
		{"paused", bdWith("c:2", func(bd *fleet.BundleDeployment) { bd.Spec.Paused = true }), current, fleet.BundleDeploymentStatus{}, "v1", Hold},
		{"off schedule", bdWith("c:2", func(bd *fleet.BundleDeployment) { bd.Spec.OffSchedule = true }), nil, fleet.BundleDeploymentStatus{}, "", Hold},
		{"waiting for values", bdWith("c:2", func(bd *fleet.BundleDeployment) { bd.Spec.WaitingForValues = true }), nil, fleet.BundleDeploymentStatus{}, "", Hold},
		{"no release yet", bdWith("c:1", nil), nil, fleet.BundleDeploymentStatus{}, "", Upgrade},
		{"release as asked", bdWith("c:1", nil), current, fleet.BundleDeploymentStatus{}, "v1", Record},
		{"new deployment ID", bdWith("c:2", nil), current, fleet.BundleDeploymentStatus{}, "v1", Upgrade},
		{"valuesFrom changed", bdWith("c:1", nil), current, fleet.BundleDeploymentStatus{}, "v2", Upgrade},
		{"forced sync", bdWith("c:1", func(bd *fleet.BundleDeployment) { bd.Spec.Options.ForceSyncGeneration = 1 }), current, fleet.BundleDeploymentStatus{}, "v1", Upgrade},
		{"failed release", bdWith("c:1", nil), &helmdeployer.Release{DeploymentID: "c:1", ValuesHash: "v1", Status: release.StatusFailed},
			fleet.BundleDeploymentStatus{}, "v1", Upgrade},
		{"Fleet's release while applied is the spec", bdWith("c:1", nil), fleetMade,
			fleet.BundleDeploymentStatus{AppliedDeploymentID: "c:1", Release: "default/app:1"}, "", Record},
		{"Fleet's release once the spec changes", bdWith("c:2", nil), fleetMade,
			fleet.BundleDeploymentStatus{AppliedDeploymentID: "c:1", Release: "default/app:1"}, "", Upgrade},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status := tc.status
			if got := Decide(tc.bd, tc.rel, &status, tc.valuesHash); got != tc.want {
				t.Fatalf("decide = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestAppliedThenReportReady(t *testing.T) {
	now := time.Now()
	bd := bdWith("c:1", func(bd *fleet.BundleDeployment) { bd.Spec.Options.ForceSyncGeneration = 4 })
	var status fleet.BundleDeploymentStatus
	Applied(bd, &helmdeployer.Release{Name: "app", Namespace: "default", Version: 2}, &status, now)
	if status.AppliedDeploymentID != "c:1" || status.Release != "default/app:2" || status.SyncGeneration == nil || *status.SyncGeneration != 4 {
		t.Fatalf("applied recorded %+v", status)
	}
	status.Ready, status.NonModified = true, true
	fleet.SetCondition(&status.Conditions, fleet.ConditionMonitored, corev1.ConditionTrue, "", "", now)
	Report(bd, &status, now)
	if status.Display.State != string(fleet.Ready) || status.Display.Deployed != "Yes" || status.Display.Monitored != "Yes" {
		t.Fatalf("display %+v", status.Display)
	}
	if c := fleet.FindCondition(status.Conditions, fleet.ConditionReady); c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("Ready condition %+v", c)
	}
}

func TestReportFailedDeploy(t *testing.T) {
	now := time.Now()
	bd := bdWith("c:2", nil)
	status := fleet.BundleDeploymentStatus{AppliedDeploymentID: "c:1"}
	MarkFailed(&status, helmrelease.Permanent(errors.New("chart app: values.yaml: broken")), now)
	Report(bd, &status, now)
	if status.Display.State != string(fleet.ErrApplied) {
		t.Fatalf("state %q, want ErrApplied", status.Display.State)
	}
	if status.Display.Deployed != "chart app: values.yaml: broken" {
		t.Fatalf("deployed %q", status.Display.Deployed)
	}
	c := fleet.FindCondition(status.Conditions, fleet.ConditionReady)
	if c == nil || c.Status != corev1.ConditionFalse || c.Message != "chart app: values.yaml: broken" {
		t.Fatalf("Ready condition %+v", c)
	}
	if c := fleet.FindCondition(status.Conditions, fleet.ConditionInstalled); c == nil || c.Status != corev1.ConditionFalse {
		t.Fatalf("a permanent error marks Installed=False: %+v", c)
	}

	transient := fleet.BundleDeploymentStatus{}
	MarkFailed(&transient, errors.New("connection refused"), now)
	if c := fleet.FindCondition(transient.Conditions, fleet.ConditionInstalled); c != nil {
		t.Fatalf("a transient error leaves Installed alone: %+v", c)
	}
}

func TestReportWaitingAndNotReady(t *testing.T) {
	now := time.Now()
	var status fleet.BundleDeploymentStatus
	Report(bdWith("c:1", nil), &status, now)
	if status.Display.State != string(fleet.WaitApplied) {
		t.Fatalf("state %q, want WaitApplied", status.Display.State)
	}
	status = fleet.BundleDeploymentStatus{AppliedDeploymentID: "c:1", NonModified: true,
		NonReadyStatus: []fleet.NonReadyStatus{{Kind: "Deployment", Namespace: "default", Name: "web"}}}
	Report(bdWith("c:1", nil), &status, now)
	c := fleet.FindCondition(status.Conditions, fleet.ConditionReady)
	if status.Display.State != string(fleet.NotReady) || c == nil || c.Reason != string(fleet.NotReady) || c.Message == "" {
		t.Fatalf("state %q, condition %+v", status.Display.State, c)
	}
}
