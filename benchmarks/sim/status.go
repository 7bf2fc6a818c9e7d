package sim

import (
	"time"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"

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
func simulated(bd *fleet.BundleDeployment, status fleet.BundleDeploymentStatus, revision, resources int, now time.Time) fleet.BundleDeploymentStatus {
	if bd.DeletionTimestamp != nil || bd.Spec.DeploymentID == "" {
		return status
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
	return status
}
