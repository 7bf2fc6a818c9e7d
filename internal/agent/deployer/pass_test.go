package deployer

import (
	"errors"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetgo/fleet/internal/helmdeployer"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
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
		want       action
	}{
		{"paused", bdWith("c:2", func(bd *fleet.BundleDeployment) { bd.Spec.Paused = true }), current, fleet.BundleDeploymentStatus{}, "v1", hold},
		{"off schedule", bdWith("c:2", func(bd *fleet.BundleDeployment) { bd.Spec.OffSchedule = true }), nil, fleet.BundleDeploymentStatus{}, "", hold},
		{"waiting for values", bdWith("c:2", func(bd *fleet.BundleDeployment) { bd.Spec.WaitingForValues = true }), nil, fleet.BundleDeploymentStatus{}, "", hold},
		{"no release yet", bdWith("c:1", nil), nil, fleet.BundleDeploymentStatus{}, "", upgrade},
		{"release as asked", bdWith("c:1", nil), current, fleet.BundleDeploymentStatus{}, "v1", record},
		{"new deployment ID", bdWith("c:2", nil), current, fleet.BundleDeploymentStatus{}, "v1", upgrade},
		{"valuesFrom changed", bdWith("c:1", nil), current, fleet.BundleDeploymentStatus{}, "v2", upgrade},
		{"forced sync", bdWith("c:1", func(bd *fleet.BundleDeployment) { bd.Spec.Options.ForceSyncGeneration = 1 }), current, fleet.BundleDeploymentStatus{}, "v1", upgrade},
		{"failed release", bdWith("c:1", nil), &helmdeployer.Release{DeploymentID: "c:1", ValuesHash: "v1", Status: release.StatusFailed},
			fleet.BundleDeploymentStatus{}, "v1", upgrade},
		{"Fleet's release while applied is the spec", bdWith("c:1", nil), fleetMade,
			fleet.BundleDeploymentStatus{AppliedDeploymentID: "c:1", Release: "default/app:1"}, "", record},
		{"Fleet's release once the spec changes", bdWith("c:2", nil), fleetMade,
			fleet.BundleDeploymentStatus{AppliedDeploymentID: "c:1", Release: "default/app:1"}, "", upgrade},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status := tc.status
			if got := decide(tc.bd, tc.rel, &status, tc.valuesHash); got != tc.want {
				t.Fatalf("decide = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestAppliedThenReportReady(t *testing.T) {
	now := time.Now()
	bd := bdWith("c:1", func(bd *fleet.BundleDeployment) { bd.Spec.Options.ForceSyncGeneration = 4 })
	var status fleet.BundleDeploymentStatus
	applied(bd, &helmdeployer.Release{Name: "app", Namespace: "default", Version: 2}, &status, now)
	if status.AppliedDeploymentID != "c:1" || status.Release != "default/app:2" || status.SyncGeneration == nil || *status.SyncGeneration != 4 {
		t.Fatalf("applied recorded %+v", status)
	}
	status.Ready, status.NonModified = true, true
	fleet.SetCondition(&status.Conditions, fleet.ConditionMonitored, corev1.ConditionTrue, "", "", now)
	report(bd, &status, now)
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
	markFailed(&status, helmdeployer.Permanent(errors.New("chart app: values.yaml: broken")), now)
	report(bd, &status, now)
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
	markFailed(&transient, errors.New("connection refused"), now)
	if c := fleet.FindCondition(transient.Conditions, fleet.ConditionInstalled); c != nil {
		t.Fatalf("a transient error leaves Installed alone: %+v", c)
	}
}

func TestReportWaitingAndNotReady(t *testing.T) {
	now := time.Now()
	var status fleet.BundleDeploymentStatus
	report(bdWith("c:1", nil), &status, now)
	if status.Display.State != string(fleet.WaitApplied) {
		t.Fatalf("state %q, want WaitApplied", status.Display.State)
	}
	status = fleet.BundleDeploymentStatus{AppliedDeploymentID: "c:1", NonModified: true,
		NonReadyStatus: []fleet.NonReadyStatus{{Kind: "Deployment", Namespace: "default", Name: "web"}}}
	report(bdWith("c:1", nil), &status, now)
	c := fleet.FindCondition(status.Conditions, fleet.ConditionReady)
	if status.Display.State != string(fleet.NotReady) || c == nil || c.Reason != string(fleet.NotReady) || c.Message == "" {
		t.Fatalf("state %q, condition %+v", status.Display.State, c)
	}
}

// The deploy step without Helm: a held BundleDeployment deploys nothing and changes no status; a
// release that is what the spec asks for is recorded as applied, nothing deployed.
func TestDeployHoldsOrRecords(t *testing.T) {
	h := &handler{deployer: &helmdeployer.Deployer{}}
	now := time.Now()
	rel := &helmdeployer.Release{Name: "app", Namespace: "default", Version: 5, DeploymentID: "c:1", Status: release.StatusDeployed}

	paused := bdWith("c:2", func(bd *fleet.BundleDeployment) { bd.Spec.Paused = true })
	var held fleet.BundleDeploymentStatus
	deployed, requeue, err := h.deploy(paused, rel, &held, now)
	if deployed != nil || requeue != 0 || err != nil || len(held.Conditions) != 0 || held.AppliedDeploymentID != "" {
		t.Fatalf("held: deployed %v, requeue %s, err %v, status %+v", deployed, requeue, err, held)
	}

	var recorded fleet.BundleDeploymentStatus
	deployed, requeue, err = h.deploy(bdWith("c:1", nil), rel, &recorded, now)
	if deployed != nil || requeue != 0 || err != nil {
		t.Fatalf("record: deployed %v, requeue %s, err %v", deployed, requeue, err)
	}
	if recorded.AppliedDeploymentID != "c:1" || recorded.Release != "default/app:5" {
		t.Fatalf("record: status %+v", recorded)
	}
	if c := fleet.FindCondition(recorded.Conditions, fleet.ConditionDeployed); c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("record: Deployed condition %+v", c)
	}
}

// enqueues records the deployer's requests to look at a BundleDeployment again.
type enqueues struct {
	fleetcontrollers.BundleDeploymentController
	after []time.Duration
}

func (e *enqueues) EnqueueAfter(_, _ string, d time.Duration) { e.after = append(e.after, d) }

// next: the version the status write replaced is remembered, the next look is scheduled, and a
// deploy error that may pass goes back for backoff (a permanent one waits its own interval).
func TestNext(t *testing.T) {
	q := &enqueues{}
	h := &handler{bds: q, interval: time.Minute}
	bd := bdWith("c:1", nil)
	bd.Namespace, bd.Name, bd.ResourceVersion = "cluster-ns", "app", "11"
	key := "cluster-ns/app"

	h.outcomes.Store(key, outcome{replaces: "10"})
	if _, err := h.next(key, bd); err != nil {
		t.Fatal(err)
	}
	if rv, _ := h.replaced.Load(key); rv != "10" || len(q.after) != 1 || q.after[0] != time.Minute {
		t.Fatalf("replaced %v, enqueued %v", rv, q.after)
	}

	h.outcomes.Store(key, outcome{replaces: "11", requeue: DependsOnRetry})
	if _, err := h.next(key, bd); err != nil || q.after[1] != DependsOnRetry {
		t.Fatalf("err %v, enqueued %v", err, q.after)
	}

	transient := errors.New("connection refused")
	h.outcomes.Store(key, outcome{replaces: "11", err: transient})
	if _, err := h.next(key, bd); !errors.Is(err, transient) || len(q.after) != 2 {
		t.Fatalf("err %v, enqueued %v", err, q.after)
	}

	h.outcomes.Store(key, outcome{replaces: "11", err: helmdeployer.Permanent(errors.New("bad chart")), requeue: PermanentRetry})
	if _, err := h.next(key, bd); err != nil || q.after[2] != PermanentRetry {
		t.Fatalf("err %v, enqueued %v", err, q.after)
	}

	if _, err := h.next(key, bd); err != nil || len(q.after) != 3 {
		t.Fatalf("no outcome, no look: err %v, enqueued %v", err, q.after)
	}
}
