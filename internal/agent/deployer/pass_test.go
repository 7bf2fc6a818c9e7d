package deployer

import (
	"errors"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetgo/fleet/internal/helmdeployer"
	"github.com/fleetgo/fleet/internal/helmrelease"
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

	h.mem.record(key, outcome{replaces: "10"})
	if _, err := h.next(key, bd); err != nil {
		t.Fatal(err)
	}
	if rv, _ := h.mem.replaced.Load(key); rv != "10" || len(q.after) != 1 || q.after[0] != time.Minute {
		t.Fatalf("replaced %v, enqueued %v", rv, q.after)
	}

	h.mem.record(key, outcome{replaces: "11", requeue: DependsOnRetry})
	if _, err := h.next(key, bd); err != nil || q.after[1] != DependsOnRetry {
		t.Fatalf("err %v, enqueued %v", err, q.after)
	}

	transient := errors.New("connection refused")
	h.mem.record(key, outcome{replaces: "11", err: transient})
	if _, err := h.next(key, bd); !errors.Is(err, transient) || len(q.after) != 2 {
		t.Fatalf("err %v, enqueued %v", err, q.after)
	}

	h.mem.record(key, outcome{replaces: "11", err: helmrelease.Permanent(errors.New("bad chart")), requeue: PermanentRetry})
	if _, err := h.next(key, bd); err != nil || q.after[2] != PermanentRetry {
		t.Fatalf("err %v, enqueued %v", err, q.after)
	}

	if _, err := h.next(key, bd); err != nil || len(q.after) != 3 {
		t.Fatalf("no outcome, no look: err %v, enqueued %v", err, q.after)
	}
}

// Helm's refusal of a resource another release owns is a takeover pending only when the
// deployment lists that resource in overwrites.
func TestTakeoverPending(t *testing.T) {
	err := errors.New(`deploying release move-ns/move-to: Unable to continue with install: ConfigMap "shared" in namespace "move-ns" exists and cannot be imported into the current release: invalid ownership metadata; annotation validation error: key "meta.helm.sh/release-name" must equal "move-to": current value is "move-from"`)
	listed := []fleet.OverwrittenResource{{Kind: "ConfigMap", Name: "shared", Namespace: "move-ns"}}
	if !takeoverPending(err, listed) {
		t.Error("a listed resource: not pending")
	}
	if takeoverPending(err, []fleet.OverwrittenResource{{Kind: "ConfigMap", Name: "other"}}) || takeoverPending(err, nil) {
		t.Error("an unlisted resource: pending")
	}
	if takeoverPending(errors.New(`ConfigMap "shared": forbidden`), listed) {
		t.Error("another error: pending")
	}
}
