package sim

import (
	"encoding/json"
	"time"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetgo/fleet/internal/agent/gates"
	"github.com/fleetgo/fleet/internal/agent/monitor"
	"github.com/fleetgo/fleet/internal/bdstatus"
	"github.com/fleetgo/fleet/internal/helmdeployer"
	"github.com/fleetgo/fleet/internal/render"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// simulated is the status a healthy agent writes for bd after one pass: the pass's own decide,
// applied and report steps, with the Helm release and the downstream cluster simulated. The
// release is taken to install at once (revision revision) and its resources objects to be ready
// and unmodified at once. A BundleDeployment being deleted, or without a deployment ID yet, keeps its status.
//
// The rollout gates bd asks for pass, unless gateFailure (non-empty: the reason) says they fail.
func simulated(bd *fleet.BundleDeployment, status fleet.BundleDeploymentStatus, revision, resources int, gateFailure string, now time.Time) fleet.BundleDeploymentStatus {
	if bd.DeletionTimestamp != nil || bd.Spec.DeploymentID == "" {
		return status
	}
	if status.AppliedDeploymentID != bd.Spec.DeploymentID {
		gates.Clear(&status) // a new deployment is gated afresh, as the agent does
	}
	opts := &bd.Spec.Options
	rel := &helmdeployer.Release{Name: render.ReleaseName(opts, bd.Name), Namespace: render.Namespace(opts), Version: revision,
		BundleID: bd.Name, DeploymentID: bd.Spec.DeploymentID, SyncGeneration: opts.ForceSyncGeneration, Status: release.StatusDeployed}
	if bdstatus.Decide(bd, rel, &status, "") != bdstatus.Hold {
		bdstatus.Applied(bd, rel, &status, now)
		fleet.SetCondition(&status.Conditions, fleet.ConditionMonitored, corev1.ConditionTrue, "", "", now)
		monitor.Result{Ready: true, NonModified: true,
			Counts: fleet.ResourceCounts{DesiredReady: resources, Ready: resources}}.Apply(&status)
	}
	bdstatus.Report(bd, &status, now)
	for _, g := range gatesOf(bd) {
		if gateFailure != "" {
			fleet.SetCondition(&status.Conditions, fleet.GateCondition(g.Name), corev1.ConditionFalse, "Failed", gateFailure, now)
		} else {
			fleet.SetCondition(&status.Conditions, fleet.GateCondition(g.Name), corev1.ConditionTrue, "Passed", "simulated", now)
		}
	}
	return status
}

// gatesOf are the rollout gates bd asks for.
func gatesOf(bd *fleet.BundleDeployment) []fleet.HealthGate {
	var out []fleet.HealthGate
	if raw := bd.Annotations[fleet.RolloutGatesAnnotation]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &out)
	}
	return out
}

// gatesPending: bd asks for a gate whose result is not reported yet.
func gatesPending(bd *fleet.BundleDeployment) bool {
	for _, g := range gatesOf(bd) {
		if c := fleet.FindCondition(bd.Status.Conditions, fleet.GateCondition(g.Name)); c == nil || c.Status == corev1.ConditionUnknown {
			return true
		}
	}
	return false
}
